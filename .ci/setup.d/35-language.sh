#!/usr/bin/env bash
# GPT-2's BPE ranks for the language pack's fixtures (task-packs/language): the
# openai-whisper sdist ships whisper/assets/gpt2.tiktoken; rgym_task_language.gpt2 reads
# it offline from ~/.cache/rgym/openai-whisper/ (no hub, no whisper install: its
# dependencies would pull numba and triton). Idempotent and quiet; fails loudly.
set -euo pipefail
folder="$HOME/.cache/rgym/openai-whisper"
if ! ls "$folder"/openai_whisper-*.tar.gz >/dev/null 2>&1; then
    mkdir -p "$folder"
    python3 -m pip download --quiet --no-deps --no-binary :all: "openai-whisper==20250625" -d "$folder" >/dev/null
fi
sdist=$(ls "$folder"/openai_whisper-*.tar.gz | head -n 1)
if ! tar tzf "$sdist" | grep 'whisper/assets/gpt2.tiktoken$' >/dev/null; then
    echo "35-language.sh: $sdist holds no whisper/assets/gpt2.tiktoken" >&2
    exit 1
fi
