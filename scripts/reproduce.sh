#!/usr/bin/env bash
# Run the pipeline so that a killed run can simply be run again (`make reproduce` calls it).
#
#   scripts/reproduce.sh                                    # = snakemake --cores all all
#   scripts/reproduce.sh --profile profiles/slurm all       # on a SLURM cluster
#   scripts/reproduce.sh --cores 2 toys                     # any snakemake arguments
#
# Before starting, when no snakemake of this checkout is alive (a run killed with SIGKILL,
# a lost terminal, a node reboot), it clears what such a run leaves behind:
#   - the working-directory lock in .snakemake/locks (`snakemake --unlock`);
#   - with a SLURM profile: the SLURM jobs whose working directory is this checkout (they
#     belong to the dead run; they are cancelled and waited for, at most 60 s), so they
#     cannot write into the new run's outputs.
#   - jobs of that run still ending: every job runs under scripts/job-shell, which ends all
#     of the job's processes when snakemake dies (SIGTERM, then SIGKILL after 30 s); it waits
#     for them, at most 60 s, so none writes into the new run's outputs.
# Then it runs snakemake with --rerun-incomplete: outputs a killed job left half-written are
# made again. A run that is still alive is left alone (snakemake then refuses the lock).
# After a Ctrl-C it says so in one line, and that running it again resumes.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd -P)
[ $# -gt 0 ] || set -- --cores all all

# pids of processes whose working directory is this checkout and whose command line matches
# the regular expression $1: not this script, nor one inside a SLURM job (SLURM_JOB_ID in
# its environment: the snakemake that runs one job there, and that job)
live_procs() {
  local p cwd environ cmdline
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    [ "$p" = $$ ] && continue
    cwd=$(readlink "/proc/$p/cwd" 2>/dev/null) || continue
    [ "$cwd" = "$ROOT" ] || continue
    # (read into variables: `tr | grep -q` under pipefail fails when grep exits first)
    environ=$(tr '\0' '\n' 2>/dev/null <"/proc/$p/environ") || continue
    [[ $'\n'$environ == *$'\n'SLURM_JOB_ID=* ]] && continue
    cmdline=$(tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline") || continue
    [[ " $cmdline" =~ $1 ]] && echo "$p"
  done
  return 0
}
live_snakemakes() { live_procs '[/ ]snakemake( |$)|-m snakemake'; }

# wait (at most 60 s) until no scripts/job-shell of this checkout is left: the jobs of a
# snakemake that ended are ending (SIGTERM, SIGKILL after 30 s)
wait_for_ending_jobs() {
  local ending
  ending=$(live_procs '/scripts/job-shell -c ')
  [ -n "$ending" ] || return 0
  echo "reproduce: waiting for the jobs of $1 to end: $(echo $ending)" >&2
  for _ in $(seq 120); do
    ending=$(live_procs '/scripts/job-shell -c ')
    [ -z "$ending" ] && return 0
    sleep 0.5
  done
  echo "reproduce: jobs $(echo $ending) still there after 60 s" >&2
  return 1
}

slurm_profile=false
for a in "$@"; do case $a in *slurm*) slurm_profile=true ;; esac; done

if [ -z "$(live_snakemakes)" ]; then
  if [ -n "$(ls -A .snakemake/locks 2>/dev/null)" ]; then
    echo "reproduce: no snakemake of $ROOT is running: removing the stale lock" >&2
    snakemake --unlock "$@" >/dev/null
  fi
  if $slurm_profile && command -v squeue >/dev/null 2>&1; then
    # jobs of a dead run of this checkout: SLURM's working directory (%Z) is the checkout
    stale=$(squeue -h --me -o '%A %Z' 2>/dev/null | awk -v d="$ROOT" '$2 == d {print $1}')
    if [ -n "$stale" ]; then
      echo "reproduce: cancelling SLURM jobs of a dead run: $(echo $stale)" >&2
      # shellcheck disable=SC2086
      scancel $stale
      for _ in $(seq 120); do
        left=$(squeue -h --me -o '%A %Z' 2>/dev/null | awk -v d="$ROOT" '$2 == d {print $1}')
        [ -z "$left" ] && break
        sleep 0.5
      done
      [ -z "$left" ] || { echo "reproduce: SLURM jobs $left still there after 60 s" >&2; exit 1; }
    fi
  fi
  wait_for_ending_jobs "a dead run" || exit 1
fi

# Not exec: after a Ctrl-C (which reaches snakemake and every job's scripts/job-shell from
# the terminal) the trap below runs once snakemake has ended.
interrupted=false
trap 'interrupted=true' INT
rc=0
snakemake --rerun-incomplete "$@" || rc=$?
if $interrupted; then
  ended="every job's processes have ended"
  wait_for_ending_jobs "the interrupted run" || ended="some jobs are still ending"
  echo "reproduce: interrupted; $ended. A traceback above ending in \`RuntimeError: Cannot close a running event loop\` is Snakemake's own (a second Ctrl-C while jobs end; Snakemake 9 closes each job thread's event loop at exit, snakemake/snakemake#3911). Run \`make reproduce\` again to resume." >&2
  exit 130
fi
exit "$rc"
