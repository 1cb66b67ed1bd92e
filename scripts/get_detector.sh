#!/usr/bin/env bash
# get_detector.sh [DIR] - install MediaPipe Hands' TFLite models (Apache-2.0)
# for the built-in hand detector.
#
# Source: the npm package @mediapipe/hands@0.4.1675469240, fetched with
# `npm pack` (no install scripts run; npm's cache serves it offline once
# fetched). hand_landmark_{full,lite}.tflite are plain files in it;
# handedness.txt and palm_detection_{full,lite}.tflite are byte ranges of
# hands_solution_packed_assets.data, listed in
# hands_solution_packed_assets_loader.js: the ranges are read from that file
# and must equal the known ones. Every file is checked against its sha256
# (handedness.txt is the 11 bytes "Left\nRight\n").
#
# DIR defaults to ${XDG_DATA_HOME:-$HOME/.local/share}/hamer/detector, the
# first place the library looks after an explicit directory and
# $HAMER_DETECTOR_DIR. Nothing is done when DIR already holds all five files
# with the right hashes. Otherwise the files are assembled in a temporary
# directory next to DIR and moved into place one by one with rename(2) (each
# file appears complete or not at all). Errors: one line on stderr, exit 1.
set -euo pipefail

PKG='@mediapipe/hands@0.4.1675469240'
TARBALL='mediapipe-hands-0.4.1675469240.tgz'
DIR="${1:-${XDG_DATA_HOME:-$HOME/.local/share}/hamer/detector}"

# name sha256 [start end]: the byte range inside the packed assets, if any
FILES=(
  "handedness.txt 3b82f0246870fec456c8632d455a4e1d5648d2836a7a513a271781144f525916 0 11"
  "palm_detection_full.tflite 2f25e740121983f68ffc05f99991d524dc0ea812134f6316a26125816941ee85 11 2341291"
  "palm_detection_lite.tflite e9a4aaddf90dda56a87235303cf00e4c2d3fb28725f68fd88772997dac905c18 2341291 4326731"
  "hand_landmark_full.tflite 8c026882c9ec059ce0f8e75266bee5a9a23c341a40e0000df755374d3d1b9b68"
  "hand_landmark_lite.tflite d7fde8ac11f8ce03f8663775bfc323f4fc9f2a38062b4f4efa142874ef5b2a48"
)

die() {
  echo "get_detector.sh: $*" >&2
  exit 1
}

sha() { sha256sum "$1" | cut -d' ' -f1; }

all_present() {
  local d="$1" e
  for e in "${FILES[@]}"; do
    set -- $e
    [ -f "$d/$1" ] && [ "$(sha "$d/$1")" = "$2" ] || return 1
  done
}

command -v sha256sum >/dev/null || die "sha256sum not found (coreutils)"
if all_present "$DIR"; then
  echo "detector models already installed in $DIR"
  exit 0
fi
command -v npm >/dev/null || die "npm not found: install Node.js/npm (Debian: apt-get install npm)"
command -v tar >/dev/null || die "tar not found"
command -v dd >/dev/null || die "dd not found"

mkdir -p "$DIR" 2>/dev/null || die "cannot create $DIR"
[ -w "$DIR" ] || die "$DIR is not writable"
TMP="$(mktemp -d "$DIR/.get_detector.XXXXXX")" || die "cannot make a temporary directory in $DIR"
trap 'rm -rf "$TMP"' EXIT

# npm pack prints notices on stderr; keep them for the error message only.
if ! (cd "$TMP" && npm pack --silent --ignore-scripts "$PKG" >pack.out 2>pack.err); then
  # retry from the cache alone (no network)
  if ! (cd "$TMP" && npm pack --silent --ignore-scripts --offline "$PKG" >pack.out 2>pack.err); then
    die "npm pack $PKG failed (no network and not in npm's cache?): $(grep -m1 -i err "$TMP/pack.err" || head -c 200 "$TMP/pack.err")"
  fi
fi
[ -f "$TMP/$TARBALL" ] || die "npm pack did not produce $TARBALL"
tar -xzf "$TMP/$TARBALL" -C "$TMP" || die "cannot unpack $TARBALL"
P="$TMP/package"
LOADER="$P/hands_solution_packed_assets_loader.js"
DATA="$P/hands_solution_packed_assets.data"
[ -f "$LOADER" ] && [ -f "$DATA" ] || die "$TARBALL lacks the packed assets (unexpected package layout)"

# Byte ranges from the loader: {"filename": ".../NAME", "start": S, "end": E}
range_of() {
  grep -o "\"filename\": *\"[^\"]*/$1\", *\"start\": *[0-9]*, *\"end\": *[0-9]*" "$LOADER" |
    sed -E 's/.*"start": *([0-9]+), *"end": *([0-9]+)/\1 \2/' | head -n1
}

for e in "${FILES[@]}"; do
  set -- $e
  name="$1" want="$2"
  if [ $# -eq 4 ]; then
    got="$(range_of "$name")"
    [ "$got" = "$3 $4" ] || die "$name: the loader lists bytes [${got:-none}), expected [$3 $4)"
    dd if="$DATA" of="$TMP/$name" bs=1M iflag=skip_bytes,count_bytes skip="$3" count="$(($4 - $3))" status=none ||
      die "cannot extract $name from $(basename "$DATA")"
  else
    [ -f "$P/$name" ] || die "$TARBALL lacks $name"
    cp "$P/$name" "$TMP/$name"
  fi
  [ "$(sha "$TMP/$name")" = "$want" ] || die "$name: sha256 mismatch (got $(sha "$TMP/$name"))"
done

for e in "${FILES[@]}"; do
  set -- $e
  chmod 0644 "$TMP/$1"
  mv -f "$TMP/$1" "$DIR/$1" || die "cannot move $1 into $DIR"
done
all_present "$DIR" || die "files in $DIR changed while installing"
echo "detector models installed in $DIR"
