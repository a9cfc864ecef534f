#!/usr/bin/env bash
# The README's command reference against the built tool: every `tessera SUBCOMMAND` it lists exists,
# and every option it shows for it is one `tessera SUBCOMMAND --help` lists; every `make TARGET` it
# shows is a Makefile target; docs/models.md names every shipped model. A renamed option or a
# dropped target fails here, not in a newcomer's first hour.
#
#   test_readme_commands.sh TESSERA_BINARY SOURCE_DIR
set -euo pipefail
tessera=$1 source=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
readme=$source/README.md
checked=0

# Lines of the README's code blocks that start with "tessera ".
while IFS= read -r line; do
  read -r -a words <<<"$line"
  sub=${words[1]}
  [[ $sub =~ ^[a-z-]+$ ]] || continue  # "ab status|resume|..." lists subcommands, checked below
  help=$("$tessera" "$sub" --help 2>&1) || fail "README: 'tessera $sub' is no command (tessera $sub --help exits non-zero)"
  for word in "${words[@]:2}"; do
    option=${word#[}
    option=${option%%]*}
    option=${option%%=*}
    [[ $option == --* && $option =~ ^--[a-z][a-z0-9-]*$ ]] || continue
    grep -q -- "$option" <<<"$help" || fail "README: 'tessera $sub' shows $option, which 'tessera $sub --help' does not list"
    checked=$((checked + 1))
  done
done < <(awk '/^```/ { inside = !inside; next } inside && /^tessera / { print }' "$readme")

# tessera ab's own subcommands.
for sub in status resume report merge history; do
  "$tessera" ab "$sub" --help >/dev/null 2>&1 || fail "README: 'tessera ab $sub' is no command"
done

# make targets shown in the README.
while IFS= read -r target; do
  grep -q "^$target:" "$source/Makefile" || fail "README: 'make $target' is no Makefile target"
  checked=$((checked + 1))
done < <(grep -o '^make [a-z-]*' "$readme" | awk '{ print $2 }' | sort -u)

# docs/models.md names every shipped model.
for model in "$source"/configs/models/*.yaml; do
  name=$(basename "$model" .yaml)
  grep -q -- "$name" "$source/docs/models.md" || fail "docs/models.md does not mention configs/models/$name.yaml"
done
echo "README commands: $checked options and targets checked against the tool and the Makefile"
echo "PASS"
