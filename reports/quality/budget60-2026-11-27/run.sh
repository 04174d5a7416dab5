#!/bin/bash
# 8 interleaved pairs of fresh ResNet18 ci b8 runs: 60 s budget and 10 s budget (defaults otherwise)
OUT=${OUT:-reports/quality/budget60-new/records}; mkdir -p $OUT
for i in 0 1 2 3 4 5 6 7; do
  for t in 60 10; do
    /usr/bin/time -f "%e" -o $OUT/wall-$t-$i.txt .venv/bin/perfsuite --machine-log none run resnet -p size=ci -p batch_size=8 \
      --max-time $t --out $OUT/r$t-$i.json > $OUT/log-$t-$i.txt 2>&1
  done
done
echo done > $OUT/DONE
