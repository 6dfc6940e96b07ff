#!/usr/bin/env bash
# Makes DIR an MNIST-format directory whose training images are a gzip stream cut short, as a
# failed download leaves it: make_corrupt_data.sh DIR
set -eu
dir=$1
rm -rf "$dir"
mkdir -p "$dir"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte \
         t10k-labels-idx1-ubyte; do
  head -c 20000 /dev/zero | gzip -1 > "$dir/$f.gz"
done
# A real header (60000 images of 28x28) and a stream cut after 1000 compressed bytes.
{ printf '\x00\x00\x08\x03\x00\x00\xea\x60\x00\x00\x00\x1c\x00\x00\x00\x1c'; head -c 200000 /dev/urandom; } \
  | gzip -1 | head -c 1000 > "$dir/train-images-idx3-ubyte.gz"
