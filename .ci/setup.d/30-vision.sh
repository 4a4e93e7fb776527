#!/usr/bin/env bash
# Fashion-MNIST's original IDX files for the vision pack's real-data test
# (task-packs/vision/tests/test_episodes.py): Debian's dataset-fashion-mnist puts them in
# /usr/share/datasets/fashion-mnist/. Idempotent and quiet; fails loudly.
set -euo pipefail
folder=/usr/share/datasets/fashion-mnist
if [ ! -s "$folder/train-images-idx3-ubyte.gz" ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends dataset-fashion-mnist >/dev/null
fi
for name in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    if [ ! -s "$folder/$name.gz" ]; then
        echo "30-vision.sh: $folder/$name.gz missing after installing dataset-fashion-mnist" >&2
        exit 1
    fi
done
