# shellcheck shell=bash disable=SC2034,SC2154
# bench/rss_sample.sh — sourced by the benches: rss_sample PID FILE writes
# "peak_RssAnon_KiB peak_(RssFile+RssShmem)_KiB" of process PID, sampled from
# /proc/PID/status every 0.2 s until it exits (GNU time gives only the total).
rss_sample() {
    local pid=$1 a=0 f=0 x y z
    while [ -r "/proc/$pid/status" ]; do
        read -r x y z < <(awk '/^RssAnon/{a=$2} /^RssFile/{f=$2} /^RssShmem/{s=$2}
                              END {print a + 0, f + 0, s + 0}' "/proc/$pid/status" 2>/dev/null ||
                          echo "0 0 0")
        [ "$x" -gt "$a" ] && a=$x
        [ $((y + z)) -gt "$f" ] && f=$((y + z))
        sleep 0.2
    done
    echo "$a $f" > "$2"
}

# measured CMD...: runs it under GNU time with the sampler on its child;
# sets m_wall m_cpu m_rss m_anon m_file (s, s, KiB x3) and m_rc; stdout+stderr
# go to $m_log (set it first)
measured() {
    local tf
    tf=$(mktemp)
    /usr/bin/time -v -o "$tf" "$@" > "$m_log" 2>&1 &
    local tp=$! cp="" sp="" rf
    rf=$(mktemp)
    echo "0 0" > "$rf"
    for _ in $(seq 50); do cp=$(pgrep -P "$tp" || true); [ -n "$cp" ] && break; sleep 0.1; done
    if [ -n "$cp" ]; then rss_sample "$cp" "$rf" & sp=$!; fi
    wait "$tp" && m_rc=0 || m_rc=$?
    [ -n "$sp" ] && wait "$sp"
    read -r m_anon m_file < "$rf"
    m_wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, t, ":"); s = 0;
                          for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s}' "$tf")
    m_cpu=$(awk -F': ' '/User time/ {u = $2} /System time/ {s = $2} END {print u + s}' "$tf")
    m_rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$tf")
    rm -f "$tf" "$rf"
}
