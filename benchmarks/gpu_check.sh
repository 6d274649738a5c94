#!/usr/bin/env bash
# One-call GPU check for sigconv: tests, compute-sanitizer, benchmarks, end to end.
#
#   benchmarks/gpu_check.sh                      # every stage: info tests sanitize bench1d bench2d e2e
#   benchmarks/gpu_check.sh tests sanitize       # a subset (also: STAGES="bench e2e" benchmarks/gpu_check.sh)
#
# Stages: info, tests, sanitize, bench (= bench1d + bench2d), bench1d, bench2d, e2e, fftstages (per-stage times
# of the fft variant, benchmarks/fft_stages.py), spectral (benchmarks/spectral_bench.py --gpu --skip-quality:
# needs the noisereduce, tqdm and joblib wheels), profile (Nsight Compute on benchmarks/profile_kernels.py:
# occupancy, achieved bandwidth and stall reasons of the kernels that missed a target), batch
# (benchmarks/batch_bench.py, GPU modes, on a machine with GPUs), boundary (benchmarks/boundary2d.py: the 2-D
# boundaries fill/wrap/symm against fill(0) per variant; BOUNDARY_ARGS for its options), tuilatency
# (benchmarks/tui_latency.py: the TUI's latency table on cuda for a sample and a synthetic stereo WAV, band-pass
# and spectral gate, as markdown in $OUT; TUI_LATENCY_ARGS for its options), startup (benchmarks/startup.py --gpu:
# `sigconv denoise` cold and warm on cuda, cpu and auto, from 10 s of audio to an hour; STARTUP_ARGS for its options).
# "all" and no argument run the first six; the last seven only when named.
# Run from the repository root with sigconv importable (PYTHONPATH) and $OUT an existing folder; the
# results land directly in $OUT (at most 8 files come back from the device machine):
#   gpu_check.log, tests.xml, sanitize.log, conv1d-*.json/.md, conv2d-*.json/.md, denoise_vs_sox-*.json,
#   extras.log (fftstages, profile and the spectral, batch and boundary benchmarks' output), spectral-*.json,
#   batch_*.json, boundary2d-*.json/.md, tui-latency-*.md, startup-*.json/.md
# Time: GPU_CHECK_BUDGET seconds in all (default 540) shared among the chosen stages by weight; a
# stage that ends early leaves its time to the later ones. T_<STAGE>=seconds (T_TESTS, T_SANITIZE,
# T_BENCH1D, T_BENCH2D, T_E2E) fixes one stage's limit. Each stage's failure is reported and the later
# stages still run; the exit status is non-zero if any stage failed. A compact summary comes last.
# Other knobs: SANITIZE_ARGS / SANITIZE_JOBS / SANITIZE_TOOLS (stage_sanitize), PYTEST_ARGS (default "-n 12" with pytest-xdist, else -x), TEST_FILES (default: tests/test_cuda1d.py tests/test_cuda2d.py tests/test_spectral.py tests/test_batch.py tests/test_tui_latency.py tests/test_prebuilt.py,
# those that exist), E2E_DURATION (seconds of audio, default 3600), BENCH1D_ARGS / BENCH2D_ARGS
# (extra options for sigconv bench).

set -u
OUT="${OUT:-/tmp/gpu_check_out}"
mkdir -p "$OUT"
WORK=/tmp/gpu_check
rm -rf "$WORK"
mkdir -p "$WORK"
LOG="$OUT/gpu_check.log"
: >"$LOG"
exec > >(tee -a "$LOG") 2>&1
TEE_PID=$!
export PYTHONUNBUFFERED=1
PY="${PYTHON:-python3}"

ALL="info tests sanitize bench1d bench2d e2e"
EXTRA="fftstages spectral profile batch boundary tuilatency startup"
REQ="${*:-${STAGES:-$ALL}}"
SEL=""
for s in $REQ; do
  case "$s" in
    all) SEL="$SEL $ALL" ;;
    bench) SEL="$SEL bench1d bench2d" ;;
    info|tests|sanitize|bench1d|bench2d|e2e|fftstages|spectral|profile|batch|boundary|tuilatency|startup) SEL="$SEL $s" ;;
    *) echo "gpu_check: unknown stage '$s' (stages: $ALL $EXTRA, bench, all)"; exit 2 ;;
  esac
done
# keep the canonical order, once each
STAGE_LIST=""
for s in $ALL $EXTRA; do
  case " $SEL " in *" $s "*) STAGE_LIST="$STAGE_LIST $s" ;; esac
done

weight() { case "$1" in info) echo 1 ;; tests) echo 8 ;; sanitize) echo 3 ;; bench1d) echo 5 ;; bench2d) echo 4 ;; e2e) echo 3 ;;
  fftstages) echo 1 ;; spectral) echo 3 ;; profile) echo 2 ;; batch) echo 3 ;; boundary) echo 2 ;; tuilatency) echo 3 ;;
  startup) echo 3 ;;
  esac; }
BUDGET="${GPU_CHECK_BUDGET:-540}"
T0=$(date +%s)

# seconds for stage $1: its T_<STAGE>, else its weight's share of what is left
stage_limit() {
  local s="$1" var left wsum=0 r w
  var="T_$(echo "$s" | tr '[:lower:]' '[:upper:]')"
  if [ -n "${!var:-}" ]; then echo "${!var}"; return; fi
  left=$(( BUDGET - ($(date +%s) - T0) ))
  for r in $REMAINING; do wsum=$(( wsum + $(weight "$r") )); done
  w=$(weight "$s")
  r=$(( left * w / (wsum > 0 ? wsum : 1) ))
  [ "$r" -lt 20 ] && r=20
  echo "$r"
}

declare -A STATUS SECS NOTE
FAILED=0

banner() { echo; echo "=================== $* ==================="; }

# ------------------------------------------------------------------------------------------ stages

stage_info() {
  local T="$1"
  nvidia-smi || echo "nvidia-smi failed"
  uname -a
  echo "CPUs: $(nproc)"
  command -v nvcc >/dev/null && nvcc --version | tail -2
  CS=$(command -v compute-sanitizer || true)
  echo "compute-sanitizer: ${CS:-not on PATH}"
  command -v sox >/dev/null && echo "sox: $(sox --version 2>&1 | head -1)" || echo "sox: not installed"
  timeout -k 5 "$T" "$PY" - <<'EOF'
import importlib, platform, sys
print("python", platform.python_version(), sys.executable)
for m in ("numpy", "scipy", "cupy", "torch", "soundfile", "pytest", "sigconv"):
    try:
        mod = importlib.import_module(m)
        print(f"{m:10} {getattr(mod, '__version__', '?'):12} {getattr(mod, '__file__', '')}")
    except Exception as e:
        print(f"{m:10} MISSING ({type(e).__name__}: {e})")
try:
    import torch
    print("torch cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "gpu", torch.cuda.is_available())
except Exception:
    pass
from sigconv import variants
from sigconv._core import devices as _devices
print("cuda_reason:", _devices.cuda_reason(), "| gpu:", _devices.gpu_name())
for op in ("conv1d", "conv2d"):
    print(op, [(v["backend"], v["name"], v["available"]) for v in variants(op)])
EOF
}

# pytest-xdist spreads the per-variant grids over workers (the exhaustive grids are marked slow and run only
# with PYTEST_ARGS="... --runslow"); without it, stop at the first failure
if "$PY" -c "import xdist" >/dev/null 2>&1; then DEFAULT_PYTEST_ARGS="-n 12 -p no:benchmark"; else DEFAULT_PYTEST_ARGS="-x"; fi

stage_tests() {
  local T="$1" files="" f rc=0 end
  for f in ${TEST_FILES:-tests/test_cuda1d.py tests/test_cuda2d.py tests/test_spectral.py tests/test_batch.py tests/test_tui_latency.py tests/test_prebuilt.py}; do
    [ -f "$f" ] && files="$files $f"
  done
  if [ -z "$files" ]; then echo "no GPU test files found"; NOTE[tests]="no test files"; return 1; fi
  end=$(( $(date +%s) + T ))
  for f in $files; do
    local left=$(( end - $(date +%s) ))
    [ "$left" -lt 10 ] && { echo "no time left for $f"; rc=1; continue; }
    local name; name=$(basename "$f" .py)
    echo "--- pytest $f (limit ${left}s)"
    # shellcheck disable=SC2086
    timeout -k 10 "$left" "$PY" -m pytest -m gpu -q ${PYTEST_ARGS:-$DEFAULT_PYTEST_ARGS} --timeout=600 -p no:cacheprovider -rfEs \
      --junitxml="$WORK/junit-$name.xml" "$f" 2>&1 | tee "$WORK/tests-$name.log"
    local r=${PIPESTATUS[0]}
    [ "$r" -eq 5 ] && { echo "(no gpu tests selected in $f)"; r=0; }
    [ "$r" -ne 0 ] && rc=$r
    NOTE[tests]="${NOTE[tests]:-}$name: $(grep -E '(passed|failed|error|skipped|no tests ran)' "$WORK/tests-$name.log" | tail -1 | tr -d '=' | sed 's/^ *//')$( [ "$r" -ne 0 ] && echo " (rc $r)"); "
  done
  "$PY" - "$WORK" "$OUT/tests.xml" <<'EOF'
import glob, sys, xml.etree.ElementTree as ET
root = ET.Element("testsuites")
for p in sorted(glob.glob(sys.argv[1] + "/junit-*.xml")):
    try:
        t = ET.parse(p).getroot()
    except ET.ParseError as e:
        print("junit merge: skipping", p, e)
        continue
    root.extend(t if t.tag == "testsuites" else [t])
ET.ElementTree(root).write(sys.argv[2], encoding="utf-8", xml_declaration=True)
EOF
  return $rc
}

stage_sanitize() {
  # The checks run as parallel processes, each under the sanitizer (NVRTC builds dominate an instrumented run): the
  # general ones (sanitize.py --no-boundary) and one per boundary shape (--shape I). SANITIZE_ARGS: variant names
  # and/or "boundary" (default: everything); SANITIZE_JOBS: processes at a time (default: the CPU count);
  # SANITIZE_TOOLS (default "memcheck racecheck"), the stage's time split evenly among them. API errors are not
  # reported: sanitize.py's docstring says why.
  local T="$1" CS rc=0 tool half nshapes parts=() jobs args="${SANITIZE_ARGS:-}"
  CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
  if [ -z "$CS" ] && command -v nvcc >/dev/null; then CS="$(dirname "$(command -v nvcc)")/compute-sanitizer"; fi
  if [ -z "$CS" ] || [ ! -x "$CS" ]; then echo "compute-sanitizer not found"; NOTE[sanitize]="compute-sanitizer not found"; return 1; fi
  if [ ! -f benchmarks/sanitize.py ]; then echo "benchmarks/sanitize.py missing"; NOTE[sanitize]="sanitize.py missing"; return 1; fi
  nshapes=$("$PY" -c "import sys; sys.path.insert(0, 'benchmarks'); import sanitize; print(len(sanitize.BOUNDARY_SHAPES))")
  parts+=("--no-boundary")
  if [ -z "$args" ] || [[ " $args " == *" boundary "* ]]; then
    for ((i = 0; i < nshapes; i++)); do parts+=("--shape $i"); done
  fi
  jobs="${SANITIZE_JOBS:-$(nproc)}"
  : >"$OUT/sanitize.log"
  set -- ${SANITIZE_TOOLS:-memcheck racecheck}
  half=$(( T / $# ))
  for tool in ${SANITIZE_TOOLS:-memcheck racecheck}; do
    echo "--- compute-sanitizer --tool $tool: ${#parts[@]} processes, $jobs at a time (limit ${half}s)"
    rm -f "$WORK"/san-"$tool"-*.log "$WORK"/san-"$tool"-*.rc
    local k=0 p
    for p in "${parts[@]}"; do echo "$k $p"; k=$((k + 1)); done | \
      timeout -k 10 "$half" xargs -P "$jobs" -L 1 sh -c \
        'i=$1; shift; "$0" --tool '"$tool"' --report-api-errors no --error-exitcode 3 --print-limit 20 '"$PY"' benchmarks/sanitize.py '"$args"' "$@" \
           >"'"$WORK"'/san-'"$tool"'-$i.log" 2>&1; echo $? >"'"$WORK"'/san-'"$tool"'-$i.rc"' "$CS"
    local r=$? nrc=0 n3=0 nother=0 f code checks
    echo "===== $tool =====" >>"$OUT/sanitize.log"
    for ((i = 0; i < ${#parts[@]}; i++)); do
      f="$WORK/san-$tool-$i"
      { echo "----- sanitize.py $args ${parts[$i]}"; head -c 300000 "$f.log" 2>/dev/null; } >>"$OUT/sanitize.log"
      if [ -f "$f.rc" ]; then
        code=$(cat "$f.rc"); nrc=$((nrc + 1))
        case "$code" in 0) ;; 3) n3=$((n3 + 1)) ;; *) nother=$((nother + 1)) ;; esac
      fi
    done
    checks=$(cat "$WORK"/san-"$tool"-*.log 2>/dev/null | grep -oE "^sanitize: [0-9]+ checks" | awk '{s += $2} END {print s + 0}')
    echo "===== $tool: $nrc of ${#parts[@]} processes ended, $checks checks, xargs exit $r =====" | tee -a "$OUT/sanitize.log"
    grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|MISMATCH" "$WORK"/san-"$tool"-*.log 2>/dev/null | sort | uniq -c | head -8
    if [ "$n3" -gt 0 ]; then NOTE[sanitize]="${NOTE[sanitize]:-}$tool FOUND ERRORS in $n3 processes; "; rc=1
    elif [ "$nrc" -lt "${#parts[@]}" ]; then NOTE[sanitize]="${NOTE[sanitize]:-}$tool TIMEOUT after ${half}s ($nrc of ${#parts[@]} ended, $checks checks); "; rc=1
    elif [ "$nother" -gt 0 ]; then NOTE[sanitize]="${NOTE[sanitize]:-}$tool: $nother processes failed (mismatch or error); "; rc=1
    else NOTE[sanitize]="${NOTE[sanitize]:-}$tool clean (${#parts[@]} processes, $checks checks); "
    fi
  done
  return $rc
}

run_bench() {  # $1 op, $2 limit, $3 extra args
  local op="$1" T="$2" extra="$3" r
  # stop starting rows 40 s before the limit so the results are written in time
  local ms=$(( T > 80 ? T - 40 : T / 2 ))
  echo "--- sigconv bench $op --out \$OUT --max-seconds $ms $extra (limit ${T}s)"
  # shellcheck disable=SC2086
  timeout -k 20 "$T" "$PY" -m sigconv bench "$op" --out "$OUT" --max-seconds "$ms" $extra 2>&1 | tee "$WORK/bench-$op.log"
  r=${PIPESTATUS[0]}
  return "$r"
}

stage_bench1d() { run_bench conv1d "$1" "${BENCH1D_ARGS:-}"; }
stage_bench2d() { run_bench conv2d "$1" "${BENCH2D_ARGS:-}"; }

stage_e2e() {
  local T="$1" r
  echo "--- denoise_vs_sox.py --gpu --duration ${E2E_DURATION:-3600} (limit ${T}s)"
  timeout -k 10 "$T" "$PY" benchmarks/denoise_vs_sox.py --gpu --duration "${E2E_DURATION:-3600}" --out "$OUT" \
    --no-md --timeout $(( T / 3 > 30 ? T / 3 : 30 )) 2>&1 | tee "$WORK/e2e.log"
  r=${PIPESTATUS[0]}
  return "$r"
}

# extras.log gathers the output of the stages below (one file, so $OUT stays within 8 files)
extras() { tee -a "$OUT/extras.log"; }

stage_fftstages() {
  local T="$1"
  echo "===== fftstages =====" | extras
  timeout -k 10 "$T" "$PY" benchmarks/fft_stages.py ${FFTSTAGES_ARGS:-} 2>&1 | extras
  return "${PIPESTATUS[0]}"
}

stage_spectral() {
  local T="$1"
  echo "===== spectral =====" | extras
  # speed only, cpu file-to-file rows left out (the quality table and those rows are CPU work, measured on a
  # CPU machine); TorchGate needs the noisereduce wheel
  timeout -k 10 "$T" "$PY" benchmarks/spectral_bench.py --gpu --skip-quality --skip-cpu-files --out "$OUT" \
    ${SPECTRAL_ARGS:-} 2>&1 | extras
  return "${PIPESTATUS[0]}"
}

stage_profile() {
  local T="$1" NCU r
  NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1 || true)
  echo "===== profile =====" | extras
  if [ -z "$NCU" ]; then echo "ncu not found" | extras; NOTE[profile]="ncu not found"; return 1; fi
  # --clock-control none: measure the card as it is (METHOD.md); one launch per kernel (profile_kernels.py)
  timeout -k 10 "$T" "$NCU" --clock-control none --profile-from-start off --target-processes all \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section SchedulerStats -o "$WORK/profile" -f \
    "$PY" benchmarks/profile_kernels.py ${PROFILE_ARGS:-} 2>&1 | tail -n 40 | extras
  r=${PIPESTATUS[0]}
  if [ -f "$WORK/profile.ncu-rep" ]; then
    "$NCU" --import "$WORK/profile.ncu-rep" --page details 2>&1 | cut -c1-160 >>"$OUT/extras.log"
    "$NCU" --import "$WORK/profile.ncu-rep" --page raw --csv \
      --metrics gpu__time_duration.sum,dram__bytes.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__occupancy_limit_registers \
      2>&1 | tee -a "$OUT/extras.log" | cut -c1-200 | head -30
  fi
  return "$r"
}

stage_batch() {
  local T="$1"
  echo "===== batch =====" | extras
  timeout -k 10 "$T" "$PY" benchmarks/batch_bench.py --out "$OUT" --timeout $(( T / 3 > 60 ? T / 3 : 60 )) \
    ${BATCH_ARGS:-} 2>&1 | extras
  return "${PIPESTATUS[0]}"
}

stage_boundary() {
  local T="$1"
  echo "===== boundary =====" | extras
  # the builds compiled first by parallel processes (--warm): NVRTC would otherwise take most of the stage
  timeout -k 10 "$T" "$PY" benchmarks/boundary2d.py --warm "$(nproc)" --out "$OUT" ${BOUNDARY_ARGS:-} 2>&1 \
    | tee "$WORK/boundary.log" | extras
  return "${PIPESTATUS[0]}"
}

stage_tuilatency() {
  local T="$1"
  echo "===== tuilatency =====" | extras
  # markdown only: four tables, so that $OUT stays within 8 files (add --formats md csv when run alone)
  timeout -k 10 "$T" "$PY" benchmarks/tui_latency.py --out "$OUT" --formats md ${TUI_LATENCY_ARGS:-} 2>&1 | extras
  return "${PIPESTATUS[0]}"
}

stage_startup() {
  local T="$1"
  echo "===== startup =====" | extras
  timeout -k 10 "$T" "$PY" benchmarks/startup.py --gpu --out "$OUT" ${STARTUP_ARGS:-} 2>&1 | extras
  return "${PIPESTATUS[0]}"
}

# ------------------------------------------------------------------------------------------ run

REMAINING="$STAGE_LIST"
for s in $STAGE_LIST; do
  T=$(stage_limit "$s")
  banner "$s (limit ${T}s)"
  t=$(date +%s)
  "stage_$s" "$T"
  rc=$?
  REMAINING="${REMAINING# }"; REMAINING="${REMAINING#"$s"}"
  SECS[$s]=$(( $(date +%s) - t ))
  if [ "$rc" -eq 0 ]; then STATUS[$s]=ok
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then STATUS[$s]=TIMEOUT; FAILED=1
  else STATUS[$s]="FAIL(rc $rc)"; FAILED=1
  fi
done

# ------------------------------------------------------------------------------------------ summary

banner "SUMMARY"
for s in $STAGE_LIST; do
  printf '%-9s %-12s %5ss  %s\n' "$s" "${STATUS[$s]}" "${SECS[$s]}" "${NOTE[$s]:-}"
done
if [[ " $STAGE_LIST " == *" tests "* ]]; then
  echo "--- tests: failures (first 15)"
  cat "$WORK"/tests-*.log 2>/dev/null | grep -E "^(FAILED|ERROR) " | head -15
fi
for op in conv1d conv2d; do
  if [ -f "$WORK/bench-$op.log" ]; then
    echo "--- bench $op"
    # the compact table (from its header line) and the verdicts; FAIL/error rows of sigconv
    awk '/^case +be +auto ms/{p=1} p && !/^wrote /' "$WORK/bench-$op.log" | cut -c1-200 >"$WORK/bench-$op.sum"
    if [ -s "$WORK/bench-$op.sum" ]; then cat "$WORK/bench-$op.sum"; else tail -n 8 "$WORK/bench-$op.log" | cut -c1-300; fi
    grep -E "^ +cuda +sigconv:.* (FAIL|error) " "$WORK/bench-$op.log" | head -8 | cut -c1-220
  fi
done
if [ -f "$WORK/boundary.log" ]; then
  echo "--- boundary"
  awk '/^\| case \| variant/{p=1} p && /^\|/' "$WORK/boundary.log" | cut -c1-200
  grep -E "^verdict|FAIL" "$WORK/boundary.log" | head -8 | cut -c1-220
fi
if [ -f "$WORK/e2e.log" ]; then
  echo "--- e2e"
  grep -E "^(generated|sox |sigconv-|soundfile-copy|cpu vs cuda|verdict:)|FAILED" "$WORK/e2e.log" | cut -c1-200
fi
echo "--- files in \$OUT ($(ls -1 "$OUT" | wc -l); at most 8 come back):"
ls -l "$OUT" | tail -n +2 | awk '{print "  " $5 "  " $9}'
[ "$(ls -1 "$OUT" | wc -l)" -gt 8 ] && echo "WARNING: more than 8 files in \$OUT: some will not come back"
echo "gpu_check: $( [ "$FAILED" -eq 0 ] && echo 'all stages ok' || echo 'SOME STAGES FAILED' ) (total $(( $(date +%s) - T0 ))s)"
exec >&- 2>&-
wait "$TEE_PID" 2>/dev/null
exit "$FAILED"
