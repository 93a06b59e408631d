#!/bin/bash
# The files of the low-bit speed table (README "Benchmarks"): the synthetic tinyllama-1.1B F16 file,
# an importance matrix from it, then per type its first two blocks quantized by llama.cpp's
# llama-quantize (pure: every block matrix that type; embedding Q4_K, output Q6_K) and repeated to 22
# blocks (repeat_blocks.py). LLAMA_BIN: a directory with llama-quantize and llama-imatrix, built
# separately (not part of this repository). usage: LLAMA_BIN=... make_files.sh DIR
set -euo pipefail
D=$1; L=$LLAMA_BIN; here=$(cd "$(dirname "$0")" && pwd); mkdir -p "$D"; cd "$D"
[ -f tl-f16.gguf ] || "$here/../../../build/examples/llm-bench" --synth tinyllama-1.1b --type f16 -o tl-f16.gguf --write-only
python3 "$here/repeat_blocks.py" shrink tl-f16.gguf tl2-f16.gguf 2
for i in 1 2 3 4; do echo "Once upon a time there was a little girl who liked to play in the park with her dog."; done > text.txt
[ -f tl.imatrix.gguf ] || "$L/llama-imatrix" -m tl-f16.gguf -f text.txt -c 128 --chunks 6 -t 2 --process-output --no-ppl -o tl.imatrix.gguf
for t in IQ1_S IQ1_M IQ2_XXS IQ2_XS IQ2_S IQ3_XXS IQ3_S TQ1_0 TQ2_0 Q1_0 Q2_0 MXFP4 NVFP4; do
  lt=$(echo $t | tr A-Z a-z)
  case $t in
    MXFP4) pre=(--pure); ft=MXFP4_MOE ;;
    NVFP4) pre=(--pure --tensor-type 'blk\..*=nvfp4'); ft=Q8_0 ;;
    *) pre=(--pure); ft=$t ;;
  esac
  "$L/llama-quantize" --imatrix tl.imatrix.gguf --token-embedding-type q4_K --output-tensor-type q6_K "${pre[@]}" \
      tl2-f16.gguf tl2-$lt.gguf $ft 2 > quantize-$lt.log 2>&1
  python3 "$here/repeat_blocks.py" expand tl2-$lt.gguf tl22-$lt.gguf 22 && rm tl2-$lt.gguf
done
