#!/usr/bin/env bash
# Downloads one language pair of the Europarl v7 parallel corpus (Koehn, 2005, "Europarl: A Parallel Corpus for
# Statistical Machine Translation") from its official release at statmt.org, unpacks it and prints the corpus
# prefix to give parla. Needs internet access; not run in CI (CI uses the samples in ../shared/data).
#
#   bash tools/get-europarl.sh de-en [DEST]      -> DEST/europarl-v7.de-en.{de,en}   (DEST default: corpus/europarl)
#   bash tools/get-europarl.sh de-en corpus/europarl | tail -1     (the prefix, e.g. for tools/quickstart.sh --data)
#
# The release has one archive per language paired with English, named with the other language first:
#   bg-en cs-en da-en de-en el-en es-en et-en fi-en fr-en hu-en it-en lt-en lv-en nl-en pl-en pt-en ro-en sk-en
#   sl-en sv-en
# en-de is accepted and mapped to de-en (the same files; the translation direction is chosen with --src/--tgt).
# The archive is downloaded to DEST/<pair>.tgz (resumed if interrupted, kept for reuse) and unpacked in place.
#
# The source release instead (one file per sitting day and language, with its CHAPTER / SPEAKER / P markup, not
# yet split into sentences nor aligned; about 1.5 GB for all 21 languages):
#   bash tools/get-europarl.sh source [DEST]     -> DEST/txt/LANG/ep-YY-MM-DD.txt, prints DEST/txt
# parla-preprocess splits and aligns it itself (docs/DATASET.md, "Europarl's source release"):
#   parla-preprocess --europarl-release DEST/txt --src-lang fr --tgt-lang en -o data/fr-en --aligned-out aligned/fr-en
set -euo pipefail

PAIRS="bg-en cs-en da-en de-en el-en es-en et-en fi-en fr-en hu-en it-en lt-en lv-en nl-en pl-en pt-en ro-en sk-en sl-en sv-en"
BASE_URL=${EUROPARL_URL:-https://www.statmt.org/europarl/v7}

usage() {
  cat <<EOF
Usage: bash tools/get-europarl.sh LANGPAIR [DEST]

Downloads $BASE_URL/LANGPAIR.tgz, unpacks it into DEST (default: corpus/europarl) and prints the
prefix PREFIX such that PREFIX.xx and PREFIX.en are the two sides of the corpus.

       bash tools/get-europarl.sh source [DEST]

Downloads the source release $BASE_URL/europarl.tgz (one file per day and language, with markup),
unpacks it into DEST and prints DEST/txt, the folder to give parla-preprocess --europarl-release.

LANGPAIR is one of: $PAIRS
(or the reverse, e.g. en-de). Set EUROPARL_URL to use a mirror.
EOF
}

die() { echo "get-europarl: error: $*" >&2; exit 2; }

case "${1:-}" in
  -h|--help) usage; exit 0 ;;
  "") usage >&2; exit 2 ;;
esac
[ $# -le 2 ] || die "too many arguments (see --help)"

pair=$1
dest=${2:-corpus/europarl}
download() {  # URL FILE: to a temporary name, renamed when complete, so an interrupted download never looks whole
  if command -v curl >/dev/null; then
    curl -fL --retry 3 -C - -o "$2.part" "$1" || die "download of $1 failed"
  elif command -v wget >/dev/null; then
    wget -c -O "$2.part" "$1" || die "download of $1 failed"
  else
    die "neither curl nor wget is installed (apt-get install curl)"
  fi
  mv "$2.part" "$2"
}
if [ "$pair" = source ]; then
  mkdir -p "$dest"
  if [ ! -d "$dest/txt" ]; then
    echo "get-europarl: downloading $BASE_URL/europarl.tgz (about 1.5 GB)" >&2
    download "$BASE_URL/europarl.tgz" "$dest/europarl.tgz"
    tar -xzf "$dest/europarl.tgz" -C "$dest" || die "$dest/europarl.tgz is not a valid .tgz archive (delete it and retry)"
  fi
  [ -d "$dest/txt" ] || die "the archive did not contain txt/"
  echo "get-europarl: languages: $(ls "$dest/txt" | tr '\n' ' ')" >&2
  echo "  parla-preprocess --europarl-release $dest/txt --src-lang fr --tgt-lang en -o data/fr-en" >&2
  echo "$dest/txt"
  exit 0
fi
[[ "$pair" =~ ^[a-z][a-z]-[a-z][a-z]$ ]] || die "LANGPAIR must look like de-en, got '$pair'"
a=${pair%-*} b=${pair#*-}
if [ "$a" = en ] && [ "$b" != en ]; then pair="$b-en"; fi
case " $PAIRS " in
  *" $pair "*) ;;
  *) die "Europarl v7 has no pair '$1'; available: $PAIRS" ;;
esac
other=${pair%-en}

mkdir -p "$dest"
archive="$dest/$pair.tgz"
url="$BASE_URL/$pair.tgz"
prefix="$dest/europarl-v7.$pair"

if [ -f "$prefix.$other" ] && [ -f "$prefix.en" ]; then
  echo "get-europarl: $prefix.{$other,en} already present" >&2
else
  echo "get-europarl: downloading $url (about 150-200 MB per pair)" >&2
  download "$url" "$archive"
  echo "get-europarl: unpacking $archive" >&2
  tar -xzf "$archive" -C "$dest" || die "$archive is not a valid .tgz archive (delete it and retry)"
  for lang in "$other" en; do
    [ -f "$prefix.$lang" ] || die "the archive did not contain $(basename "$prefix.$lang")"
  done
fi

lines_a=$(wc -l < "$prefix.$other")
lines_b=$(wc -l < "$prefix.en")
[ "$lines_a" = "$lines_b" ] || die "$prefix.$other has $lines_a lines but $prefix.en has $lines_b"
echo "get-europarl: $lines_a sentence pairs; train with e.g." >&2
echo "  bash tools/quickstart.sh --data $prefix --src $other --tgt en --config configs/europarl-de-en-base.json" >&2
echo "  (the Transformer base recipe, docs/RECIPES.md; its settings suit every Europarl pair)" >&2
echo "$prefix"
