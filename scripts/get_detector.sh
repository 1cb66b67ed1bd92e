#!/usr/bin/env bash
# get_detector.sh [DIR] - install MediaPipe Hands' and Holistic's TFLite
# models (Apache-2.0) for the built-in hand detector and its body pass, and
# the hand-box detector of @vladmandic/human (MIT; a TF.js graph model) for
# its proposal pass.
#
# Sources: the npm packages @mediapipe/hands@0.4.1675469240 and
# @mediapipe/holistic@0.5.1675471629, fetched with `npm pack` (no install
# scripts run; npm's cache serves them offline once fetched).
# hand_landmark_{full,lite}.tflite and pose_landmark_{full,lite}.tflite are
# plain files in them; handedness.txt and palm_detection_{full,lite}.tflite
# are byte ranges of hands_solution_packed_assets.data, pose_detection.tflite
# and hand_recrop.tflite of holistic_solution_packed_assets.data, as listed
# in the packages' *_packed_assets_loader.js: the ranges are read from those
# files and must equal the known ones. Every file is checked against its
# sha256 (handedness.txt is the 11 bytes "Left\nRight\n"). From
# @vladmandic/human@3.3.6: models/handtrack.json and models/handtrack.bin,
# installed under their base names.
#
# DIR defaults to ${XDG_DATA_HOME:-$HOME/.local/share}/hamer/detector, the
# first place the library looks after an explicit directory and
# $HAMER_DETECTOR_DIR. Nothing is done when DIR already holds all eleven files
# with the right hashes. Otherwise the files are assembled in a temporary
# directory next to DIR and moved into place one by one with rename(2) (each
# file appears complete or not at all). Errors: one line on stderr, exit 1.
set -euo pipefail

DIR="${1:-${XDG_DATA_HOME:-$HOME/.local/share}/hamer/detector}"

# package key: npm spec, then the prefix of its packed assets (NAME_packed_assets*)
PKGS=(
  "hands @mediapipe/hands@0.4.1675469240 hands_solution"
  "holistic @mediapipe/holistic@0.5.1675471629 holistic_solution"
  "human @vladmandic/human@3.3.6 -"
)

# package path sha256 [start end]: the byte range inside the packed assets, if
# any; the file is installed under the path's base name
FILES=(
  "hands handedness.txt 3b82f0246870fec456c8632d455a4e1d5648d2836a7a513a271781144f525916 0 11"
  "hands palm_detection_full.tflite 2f25e740121983f68ffc05f99991d524dc0ea812134f6316a26125816941ee85 11 2341291"
  "hands palm_detection_lite.tflite e9a4aaddf90dda56a87235303cf00e4c2d3fb28725f68fd88772997dac905c18 2341291 4326731"
  "hands hand_landmark_full.tflite 8c026882c9ec059ce0f8e75266bee5a9a23c341a40e0000df755374d3d1b9b68"
  "hands hand_landmark_lite.tflite d7fde8ac11f8ce03f8663775bfc323f4fc9f2a38062b4f4efa142874ef5b2a48"
  "holistic pose_detection.tflite a63c614bef30d35947f13be361820b1e4e3bec9cfeebf4d11216a18373108e85 13915467 16877755"
  "holistic hand_recrop.tflite 67d996ce96f9d36fe17d2693022c6da93168026ab2f028f9e2365398d8ac7d5d 9464955 9588747"
  "holistic pose_landmark_full.tflite e9a5c5cb17f736fafd4c2ec1da3b3d331d6edbe8a0d32395855aeb2cdfd64b9f"
  "holistic pose_landmark_lite.tflite f17bfbecadb61c3be1baa8b8d851cc6619c870a87167b32848ad20db306b9d61"
  "human models/handtrack.json a27d86daea1799c65dd0ad99ea1855a6b6dc721bf7ba4d4eb1a138c9e51d5755"
  "human models/handtrack.bin 70164f725aefbbf8094a8ef4150dc10e906b6f0976b484ef8ec882d3eae4b812"
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
    local n="${2##*/}"
    [ -f "$d/$n" ] && [ "$(sha "$d/$n")" = "$3" ] || return 1
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

# fetch KEY SPEC PREFIX: unpack the package into $TMP/KEY/package.
fetch() {
  local key="$1" spec="$2" tarball
  tarball="$(echo "${spec#@}" | sed -e 's|/|-|' -e 's|@|-|').tgz"
  mkdir -p "$TMP/$key" || die "cannot make $TMP/$key"
  # npm pack prints notices on stderr; keep them for the error message only.
  if ! (cd "$TMP/$key" && npm pack --silent --ignore-scripts "$spec" >pack.out 2>pack.err); then
    # retry from the cache alone (no network)
    if ! (cd "$TMP/$key" && npm pack --silent --ignore-scripts --offline "$spec" >pack.out 2>pack.err); then
      die "npm pack $spec failed (no network and not in npm's cache?): $(grep -m1 -i err "$TMP/$key/pack.err" || head -c 200 "$TMP/$key/pack.err")"
    fi
  fi
  [ -f "$TMP/$key/$tarball" ] || die "npm pack did not produce $tarball"
  tar -xzf "$TMP/$key/$tarball" -C "$TMP/$key" || die "cannot unpack $tarball"
  [ "$3" = "-" ] || { [ -f "$TMP/$key/package/$3_packed_assets_loader.js" ] && [ -f "$TMP/$key/package/$3_packed_assets.data" ]; } ||
    die "$tarball lacks the packed assets (unexpected package layout)"
}

# Byte ranges from the loader: {"filename": ".../NAME", "start": S, "end": E}
range_of() {
  grep -o "\"filename\": *\"[^\"]*/$2\", *\"start\": *[0-9]*, *\"end\": *[0-9]*" "$1" |
    sed -E 's/.*"start": *([0-9]+), *"end": *([0-9]+)/\1 \2/' | head -n1 || true
}

declare -A PREFIX
for p in "${PKGS[@]}"; do
  set -- $p
  fetch "$1" "$2" "$3"
  PREFIX[$1]="$3"
done

# Every range first (a changed package layout is named before any hash).
for e in "${FILES[@]}"; do
  set -- $e
  [ $# -eq 5 ] || continue
  got="$(range_of "$TMP/$1/package/${PREFIX[$1]}_packed_assets_loader.js" "$2")"
  [ "$got" = "$4 $5" ] || die "$2: the loader lists bytes [${got:-none}), expected [$4 $5)"
done

for e in "${FILES[@]}"; do
  set -- $e
  key="$1" src="$2" name="${2##*/}" want="$3"
  P="$TMP/$key/package"
  if [ $# -eq 5 ]; then
    DATA="$P/${PREFIX[$key]}_packed_assets.data"
    dd if="$DATA" of="$TMP/$name" bs=1M iflag=skip_bytes,count_bytes skip="$4" count="$(($5 - $4))" status=none ||
      die "cannot extract $name from $(basename "$DATA")"
  else
    [ -f "$P/$src" ] || die "the $key package lacks $src"
    cp "$P/$src" "$TMP/$name"
  fi
  [ "$(sha "$TMP/$name")" = "$want" ] || die "$name: sha256 mismatch (got $(sha "$TMP/$name"))"
done

for e in "${FILES[@]}"; do
  set -- $e
  n="${2##*/}"
  chmod 0644 "$TMP/$n"
  mv -f "$TMP/$n" "$DIR/$n" || die "cannot move $n into $DIR"
done
all_present "$DIR" || die "files in $DIR changed while installing"
echo "detector models installed in $DIR"
