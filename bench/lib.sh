# Shared by the bench scripts (source it).

# wait_listening LOG: prints the http:// address a `bdn serve` or `bdn cache serve` logged in LOG
# ("listening on http://…") once it has, within 10 s; else prints LOG to stderr and exits 1.
wait_listening() {
  local u=""
  for _ in $(seq 1 100); do
    u=$(sed -n '/listening on http:/{s/.*listening on \(http:\/\/[^ ]*\).*/\1/p;q}' "$1")
    [ -n "$u" ] && { echo "$u"; return 0; }
    sleep 0.1
  done
  echo "server did not start: $(cat "$1")" >&2
  exit 1
}
