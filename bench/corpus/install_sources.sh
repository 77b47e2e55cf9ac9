#!/usr/bin/env bash
# Installs the Debian 12 packages whose text bench/corpus/make_passages.py
# turns into the passage corpus, and fetches the English package-description
# lists (Translation-en) that apt leaves out when Acquire::Languages is "none".
# Idempotent: installs only what is missing; runs as root or through sudo.
#
# Note: openjdk-17-doc must match the installed openjdk-17-* version, so on a
# machine with an older openjdk-17 point release apt upgrades it as well.
set -euo pipefail

PACKAGES=(
  # dictionaries
  wordnet-base dict-gcide dict-foldoc dict-jargon dict-devil dict-vera
  fortunes-min fortunes
  # public-domain Bibles, commentaries and Strong's lexicons (SWORD modules)
  sword-text-kjv sword-text-web sword-comm-mhcc sword-comm-scofield
  sword-comm-tdavid sword-dict-strongs-greek sword-dict-strongs-hebrew
  # HTML documentation
  python3.11-doc postgresql-doc-15 linux-doc-6.1 python-django-doc nodejs-doc
  openjdk-17-doc
  python-pandas-doc python-scipy-doc python-sqlalchemy-doc gimp-help-en rust-doc
  abs-guide
  debian-reference-en developers-reference debian-faq debian-policy maint-guide
)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi

lists=/var/lib/apt/lists
conf=$(mktemp)
trap 'rm -f "$conf"' EXIT
# A config file read last wins over the image's "Languages none" setting.
printf '#clear Acquire::Languages;\nAcquire::Languages { "en"; };\n' > "$conf"

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ! ls "$lists"/*_i18n_Translation-en* >/dev/null 2>&1 || [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get -c "$conf" update
fi

if [ ${#missing[@]} -gt 0 ]; then
  # On a shared machine an upgrade or removal breaks others' work (2026-12-04: nodejs-doc
  # removed nodesource's nodejs; openjdk-17-doc upgrades the JDK under Bazel servers;
  # python3.11-doc, postgresql-doc-15 and linux-doc-6.1 upgrade python3.11, postgresql-15
  # and linux-libc-dev). Refuse those; unpack such sources instead (PROVENANCE.md).
  changes=$($SUDO apt-get -c "$conf" install -s --no-install-recommends "${missing[@]}" |
    grep -E '^(Remv |Inst [^ ]+ \[)' || true)
  if [ -n "$changes" ] && [ "${ALLOW_SYSTEM_CHANGES:-0}" != 1 ]; then
    echo "error: installing ${missing[*]} would remove or upgrade installed packages:" >&2
    echo "$changes" >&2
    echo "unpack those sources (PROVENANCE.md, make_passages.py --extracted) or set ALLOW_SYSTEM_CHANGES=1" >&2
    exit 1
  fi
  echo "installing: ${missing[*]}"
  $SUDO env DEBIAN_FRONTEND=noninteractive \
    apt-get -c "$conf" install -y --no-install-recommends "${missing[@]}"
else
  echo "all ${#PACKAGES[@]} source packages already installed"
fi

if ! ls "$lists"/*_i18n_Translation-en* >/dev/null 2>&1; then
  echo "error: no Translation-en lists under $lists after apt-get update" >&2
  exit 1
fi
