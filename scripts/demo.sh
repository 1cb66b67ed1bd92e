#!/usr/bin/env bash
# Set up on a fresh Debian 12 machine (as root), build, and run the main job:
# a photo in, the hands found and regressed, RESULT.json and an overlay out.
#   bash scripts/demo.sh [path/to/hamer.ckpt [photo.jpg]]
# Installs the Debian packages, builds, installs the hand-detector models
# (scripts/get_detector.sh) and the web page of `hamer serve`
# (scripts/get_web.sh). Without a checkpoint a small synthetic one in
# the official format is generated: the hands are found for real, but the
# meshes of random weights mean nothing; with the released hamer.ckpt they
# are the real result (docs/models.md: where to get it). Without a photo,
# a hand photo from the npm package fingerpose@0.1.0 (MIT) is used. At the
# end it says how to open the page.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
bash scripts/get_detector.sh
bash scripts/get_web.sh
mkdir -p build/demo
ckpt=${1:-}
if [ -z "$ckpt" ]; then
    ckpt=build/demo/synthetic.ckpt
    [ -f "$ckpt" ] || /usr/bin/python3 tests/hamer_fixture.py --depth 2 --head-depth 2 --seed 0 --out "$ckpt"
fi
photo=${2:-}
if [ -z "$photo" ]; then
    photo=build/demo/hand.jpg
    if [ ! -f "$photo" ]; then
        tmp=$(mktemp -d)
        (cd "$tmp" && npm pack --silent fingerpose@0.1.0 >/dev/null && tar xzf fingerpose-0.1.0.tgz package/assets/nocurl.jpg)
        mv "$tmp/package/assets/nocurl.jpg" "$photo"
        rm -rf "$tmp"
    fi
fi
build/hamer run --model "$ckpt" --image "$photo" --output build/demo/result.json --render build/demo/overlay.png \
    --obj-dir build/demo/meshes
/usr/bin/python3 - <<'PY'
import json
r = json.load(open("build/demo/result.json"))
print(f"{len(r['hands'])} hand(s) ({r['boxes']} boxes) in a {r['image']['width']}x{r['image']['height']} photo; "
      f"timings (ms): " + ", ".join(f"{k} {v:.0f}" for k, v in r["timings_ms"].items()))
for i, h in enumerate(r["hands"]):
    d = h.get("detection", {})
    print(f"  hand {i}: {'right' if h['is_right'] else 'left'}, box {[round(v) for v in h['bbox']]}, "
          f"detector score {d.get('score', float('nan')):.3f}, cam_t_full {[round(v, 3) for v in h['cam_t_full']]}")
print("wrote build/demo/result.json, build/demo/overlay.png, build/demo/meshes/")
PY
if [ "$ckpt" = build/demo/synthetic.ckpt ]; then
    echo "the meshes are of a synthetic checkpoint (random weights); the released hamer.ckpt: docs/models.md"
fi
echo "the web page (a photo or your webcam in, hands out): build/hamer serve --model $ckpt --port 8080," \
     "then open http://127.0.0.1:8080/"
