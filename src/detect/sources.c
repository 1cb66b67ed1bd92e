/* sources.c - the passes of hm_det_run besides the palm passes: the body
 * pass's hands (detect/body.h) and the hand-box proposals
 * (detect/handtrack.h), each verified by the hand landmark model, and the
 * checks that keep impossible boxes out (detect.h step 5). */
#include <math.h>
#include <string.h>

#include "core/util.h"
#include "detect/det_internal.h"

/* A keypoint-only box from the body pass is returned only when it can be
 * its person's hand: its side at least o->body_box_shoulder of the person's
 * shoulder width (landmarks 11 and 12; a hand is about 0.4 of it, the
 * boxes of real hands measured 0.28-0.69 on the test photos, the box in
 * camera.png's background 0.05), its centre within one side of the wrist
 * it was taken from, its centre inside the image and at least half of it
 * inside, and its side at least o->min_box. */
static int kp_box_ok(const hm_det_hand *k, const hm_body_person *p, int w, int h, const hm_det_opts *o) {
    const double side = fmax(k->box[2] - k->box[0], k->box[3] - k->box[1]);
    const double sw = hypot(p->lm[11][0] - p->lm[12][0], p->lm[11][1] - p->lm[12][1]);
    const double cx = 0.5 * (k->box[0] + k->box[2]), cy = 0.5 * (k->box[1] + k->box[3]);
    if (!(side >= o->min_box) || !(side >= o->body_box_shoulder * sw)) return 0;
    if (!(hypot(cx - k->wrist[0], cy - k->wrist[1]) <= side)) return 0;
    if (!(cx >= 0 && cx < w && cy >= 0 && cy < h)) return 0;
    const double iw = fmin(k->box[2], w) - fmax(k->box[0], 0), ih = fmin(k->box[3], h) - fmax(k->box[1], 0);
    const double area = (double)(k->box[2] - k->box[0]) * (k->box[3] - k->box[1]);
    return iw > 0 && ih > 0 && iw * ih >= 0.5 * area;
}

int hm_det_add_body(hm_det_state *s, const uint8_t *rgb, int w, int h, const hm_det_opts *o, hm_pool *pool, int *nh,
                    hm_det_stats *st) {
    hm_body_opts bo;
    hm_body_opts_default(&bo);
    bo.max_persons = o->body_persons;
    bo.min_presence = o->min_presence;
    hm_body_stats bst;
    int nb = 0, np = 0;
    int rc = hm_body_run(s->body, s, rgb, w, h, &bo, pool, s->body_hands, 2 * HM_BODY_MAX_PERSONS, &nb, s->persons, &np,
                         &bst);
    if (rc) return rc;
    st->body_persons = bst.persons;
    st->body_ms = bst.total_ms;
    for (int i = 0; i < nb; i++) {
        const hm_body_hand *b = &s->body_hands[i];
        if (b->body_only) continue;
        hm_det_hand *d = &s->hands[(*nh)++];
        *d = b->hand;
        d->pass = HM_DET_PASS_BODY;
        d->passes = 1u << HM_DET_PASS_BODY;
        d->level = 0;
        d->levels = 0;
        d->wrist[0] = d->landmarks[0][0], d->wrist[1] = d->landmarks[0][1];
        /* The person's side, unless the landmark model confidently says the
         * other: then the pose's wrist was on someone else's hand (seen on
         * hamer_example_1.jpg), so neither its side nor its person is
         * trusted */
        const float hd = b->hand.handedness;
        const int confident = hd > 0.9f || hd < 0.1f, model_right = hd > 0.5f;
        if (confident && model_right != b->is_right) {
            d->person = -1;
            d->is_right = model_right;
        } else {
            d->person = b->person;
            d->is_right = b->is_right;
        }
        st->body_hands++;
    }
    /* the keypoint-only boxes last: a hand with landmarks is kept before
     * any of them it repeats */
    for (int i = 0; i < nb && o->body_boxes; i++) {
        const hm_body_hand *b = &s->body_hands[i];
        if (!b->body_only || !(b->wrist_visibility >= o->body_box_visibility)) continue;
        hm_det_hand k = b->hand;
        k.pass = HM_DET_PASS_KEYPOINTS;
        k.passes = 1u << HM_DET_PASS_KEYPOINTS;
        k.level = 0, k.levels = 0;
        k.palm_score = b->wrist_visibility;
        k.person = b->person;
        k.is_right = b->is_right;
        k.wrist[0] = b->wrist[0], k.wrist[1] = b->wrist[1];
        if (b->person < 0 || b->person >= np || !kp_box_ok(&k, &s->persons[b->person], w, h, o)) {
            st->dropped++;
            continue;
        }
        s->hands[(*nh)++] = k;
        st->body_boxes++;
    }
    return HM_OK;
}

static double iou_f(const float a[4], const float b[4]) {
    const double iw = fmin(a[2], b[2]) - fmax(a[0], b[0]), ih = fmin(a[3], b[3]) - fmax(a[1], b[1]);
    const double in = (iw > 0 ? iw : 0) * (ih > 0 ? ih : 0);
    const double u = (double)(a[2] - a[0]) * (a[3] - a[1]) + (double)(b[2] - b[0]) * (b[3] - b[1]) - in;
    return u > 0 ? in / u : 0.0;
}

/* The re-crop rectangle a proposal is verified on: centred on its box,
 * square, PROPOSAL_CROP x the box's longer side, upright (the re-crop
 * model finds the hand's rotation). Measured on the annotated photos
 * against 1.2, 1.8 and 2.1: 1.5 kept every hand the others kept but one
 * and gave astronaut's sleeve 0.12 (1.2: 0.55). */
#define PROPOSAL_CROP 1.5
/* A proposal overlapping a hand already found by more than this IoU is
 * that hand (no landmark call). */
#define PROPOSAL_REPEAT 0.6

int hm_det_add_proposals(hm_det_state *s, const uint8_t *rgb, int w, int h, const hm_det_opts *o, hm_pool *pool,
                         int *nh, hm_det_stats *st) {
    const double t0 = 1e3 * hm_now();
    hm_ht_opts ho;
    hm_ht_opts_default(&ho);
    ho.min_score = o->proposal_score;
    ho.max_out = o->proposal_max > 0 ? o->proposal_max : 1;
    int np = 0;
    int rc = hm_ht_run(s->ht, rgb, w, h, &ho, pool, s->props, &np, NULL);
    if (rc) return rc;
    if (o->proposal_max == 0) np = 0;
    st->proposals = np;
    const int found = *nh;
    for (int i = 0; i < np; i++) {
        const hm_ht_box *p = &s->props[i];
        int repeat = 0;
        for (int j = 0; j < found && !repeat; j++)
            repeat = s->hands[j].pass != HM_DET_PASS_KEYPOINTS && iou_f(p->box, s->hands[j].box) > PROPOSAL_REPEAT;
        if (repeat) continue;
        const double side = fmax(p->box[2] - p->box[0], p->box[3] - p->box[1]);
        const hm_det_rect big = {0.5 * (p->box[0] + p->box[2]), 0.5 * (p->box[1] + p->box[3]), PROPOSAL_CROP * side,
                                 PROPOSAL_CROP * side, 0.0};
        hm_det_hand *d = &s->hands[*nh];
        memset(d, 0, sizeof *d);
        int ok;
        st->proposal_calls++;
        st->landmark_calls++;
        if ((rc = hm_body_recrop_hand(s->body, s, rgb, w, h, big, o->proposal_presence, pool, d, &ok, NULL, NULL)))
            return rc;
        if (!ok) continue;
        d->is_right = d->handedness > 0.5f;
        d->palm_score = p->score;
        d->pass = HM_DET_PASS_PROPOSAL;
        d->passes = 1u << HM_DET_PASS_PROPOSAL;
        d->person = -1;
        d->wrist[0] = d->landmarks[0][0], d->wrist[1] = d->landmarks[0][1];
        (*nh)++;
        st->proposal_hands++;
    }
    st->proposal_ms = 1e3 * hm_now() - t0;
    return HM_OK;
}
