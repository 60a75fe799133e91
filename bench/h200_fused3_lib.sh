# Sourced by bench/h200_fused3_final.sh and h200_fused3_check.sh (W: the log folder; NEW,
# OLD: the two source trees). keep NAME...: add files of W to $OUT/logs.tar (the device
# returns few files); bench NAME TREE ARGS...: `oidn-gpu bench --backend cuda` on that tree.
keep() { tar -rf "$OUT/logs.tar" -C $W "$@"; }
bench() {
  local name=$1 tree=$2; shift 2
  PYTHONPATH=${!tree}/src:/tmp/site timeout 60 python3 -m oidn_gpu bench --backend cuda \
    --host-runs 3 --json "$W/bench_$name.json" "$@" 2>&1 | grep -v Warning \
    > "$W/bench_$name.log"
  keep "bench_$name.log" "bench_$name.json"
  echo "== $name"; grep -E "e2e gpu|gpu net|memory" "$W/bench_$name.log"
}
