# bash completion for sonde: subcommands, their options and the options' values, read from the
# tool's own --help (so they never go stale), then profile files (*.db) and, after `run --`,
# commands.
_sonde() {
  local cur prev words cword
  _init_completion 2>/dev/null || { cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}; words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; }
  local sub="" i
  for ((i = 1; i < cword; i++)); do
    if [[ ${words[i]} == -- && $sub == run ]]; then
      _command_offset $((i + 1)) 2>/dev/null || COMPREPLY=($(compgen -c -- "$cur"))
      return
    fi
    [[ -z $sub && ${words[i]} != -* ]] && sub=${words[i]}
  done
  if [[ -z $sub ]]; then
    local subs
    subs=$("${words[0]}" --help 2>/dev/null | awk '/^Subcommands:/ {on = 1; next} on && !NF {exit} on {print $1}')
    COMPREPLY=($(compgen -W "$subs --help --version" -- "$cur"))
    return
  fi
  # After an option that takes a value: the values its --help lists (`-f,--format TEXT:{a,b}`),
  # any file for an output, nothing for a free value (a number, a name); a flag (its help has
  # no type after its names) is followed by what follows the subcommand.
  if [[ $prev == -* && $prev != -- ]]; then
    local line
    line=$("${words[0]}" "$sub" --help 2>/dev/null | grep -E -m1 -- "^ +([^ ]*,)?${prev}(,[^ ]*)? [A-Z]")
    if [[ -n $line ]]; then
      if [[ $line =~ :\{([^}]*)\} ]]; then
        COMPREPLY=($(compgen -W "${BASH_REMATCH[1]//,/ }" -- "$cur"))
      elif [[ $prev == -o || $prev == --output || $line =~ (FILE|PATH|DIR) ]]; then
        COMPREPLY=($(compgen -f -- "$cur"))
      else
        COMPREPLY=()
      fi
      return
    fi
  fi
  if [[ $cur == -* ]]; then
    local opts
    opts=$("${words[0]}" "$sub" --help 2>/dev/null | grep -oE -- '(^|[ ,])--?[A-Za-z][A-Za-z0-9-]*' | tr -d ' ,' | sort -u)
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    return
  fi
  COMPREPLY=($(compgen -f -X '!*.db' -- "$cur") $(compgen -d -- "$cur"))
}
complete -o filenames -F _sonde sonde
