# bash completion for sonde: subcommands and their options, read from the tool's own --help
# (so they never go stale), then profile files (*.db) and, after `run --`, commands.
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
  if [[ $cur == -* ]]; then
    local opts
    opts=$("${words[0]}" "$sub" --help 2>/dev/null | grep -oE -- '(^|[ ,])--?[A-Za-z][A-Za-z0-9-]*' | tr -d ' ,' | sort -u)
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    return
  fi
  COMPREPLY=($(compgen -f -X '!*.db' -- "$cur") $(compgen -d -- "$cur"))
}
complete -o filenames -F _sonde sonde
