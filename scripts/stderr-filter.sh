# Sourced by ./decodiff: drop_incubator_notice filters the JVM's stderr (stdin to stdout). It drops the one line
# "WARNING: Using incubator modules: jdk.incubator.vector" the JVM prints on every start, passes every other line,
# and after the notice streams the rest unbuffered (cat), so a progress bar drawn with \r shows as it is drawn.
drop_incubator_notice() {
  local line
  # (a last line without a newline, e.g. a progress bar, is passed on as it is)
  while IFS= read -r line || { printf '%s' "$line"; false; }; do
    [ "$line" = "WARNING: Using incubator modules: jdk.incubator.vector" ] && break
    printf '%s\n' "$line"
    # Only the JVM's own start-up lines can precede the notice; at anything else, stop looking.
    case "$line" in WARNING:*|*"VM warning"*) ;; *) break ;; esac
  done
  exec cat
}
