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
# Then it runs snakemake with --rerun-incomplete: outputs a killed job left half-written are
# made again. A run that is still alive is left alone (snakemake then refuses the lock).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd -P)
[ $# -gt 0 ] || set -- --cores all all

# pids of snakemake processes whose working directory is this checkout: not this script,
# nor the snakemake that runs one job inside a SLURM job (SLURM_JOB_ID in its environment)
live_snakemakes() {
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
    [[ " $cmdline" =~ [/\ ]snakemake(\ |$)|-m\ snakemake ]] && echo "$p"
  done
  return 0
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
fi
exec snakemake --rerun-incomplete "$@"
