#!/bin/sh
# The two system packages the Python packages cannot bring: bubblewrap (the sandbox that
# `course grade` runs student code in) and Chromium (the browser that tests/notebooks/test_lectures.py
# drives through Playwright). Installed with apt-get when run as root on Debian/Ubuntu;
# elsewhere this explains what is missing and what it disables. Never fails.
missing=""
command -v bwrap >/dev/null 2>&1 || missing="$missing bubblewrap"
[ -x /usr/bin/chromium ] || command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "installing Debian's$missing"
        # shellcheck disable=SC2086 # $missing holds several package names on purpose
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null; } \
            || echo "warning: could not install$missing with apt-get"
    fi
    command -v bwrap >/dev/null 2>&1 || echo "warning: bubblewrap is missing: 'course grade' refuses to run student code until it is installed (apt-get install bubblewrap), unless you pass --no-sandbox-i-trust-this-code."
    { [ -x /usr/bin/chromium ] || command -v chromium >/dev/null 2>&1; } || echo "warning: Chromium is missing: the browser tests of the slides are skipped (apt-get install chromium)."
else
    echo "bubblewrap and Chromium found"
fi
# Optional: Debian's Chromium headless shell, the lighter headless build that
# tests/browser/test_hub.py runs where it is installed (the full Chromium otherwise). Asked for on
# its own: a distribution without the package must not keep the two above from installing.
if [ ! -x /usr/lib/chromium/chromium-headless-shell ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
        && apt-cache show chromium-headless-shell >/dev/null 2>&1; then
    echo "installing Debian's chromium-headless-shell"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium-headless-shell >/dev/null \
        || echo "note: could not install chromium-headless-shell; the hub test uses the full Chromium"
fi
exit 0
