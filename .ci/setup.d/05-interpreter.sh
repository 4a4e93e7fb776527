#!/usr/bin/env bash
# The security tests run the project's interpreter as unprivileged users (the grader's and
# the agent's uids, a normal user with and without bubblewrap). A Python installed under a
# private home (pyenv in /root, mode 0700) is closed to them: open the folders on the way to
# the interpreter for traversal (o+x, no listing), as a system Python already is.
# Idempotent and quiet; fails loudly.
set -euo pipefail
real=$(python3 -c 'import os, sys; print(os.path.realpath(sys.executable))')
prefix=$(python3 -c 'import os, sys; print(os.path.realpath(sys.base_prefix))')
for path in "$real" "$prefix"; do
    dir=$(dirname "$path")
    while [ "$dir" != "/" ]; do
        if [ "$(stat -c %U "$dir")" = "root" ] && ! [ -x "$dir" -a "$(( $(stat -c %a "$dir" | sed 's/^.*\(.\)$/\1/') & 1 ))" = 1 ]; then
            chmod o+x "$dir"
        fi
        dir=$(dirname "$dir")
    done
done
if ! setpriv --reuid=65534 --regid=65534 --clear-groups "$real" -c 'import sys' 2>/dev/null; then
    echo "05-interpreter.sh: $real cannot be run by an unprivileged user (check the modes of its folders)" >&2
    exit 1
fi
