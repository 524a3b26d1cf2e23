# Sourced by ./decodiff and ./run-tests: finds a JDK 25 and exports JAVA_HOME, or explains how to get one.
find_jdk25() {
  local cand
  for cand in "${JAVA_HOME:-}" /usr/lib/jvm/*25* /opt/java/*25* /opt/*jdk*25* "$HOME"/.sdkman/candidates/java/25*; do
    [ -n "$cand" ] && [ -x "$cand/bin/java" ] || continue
    # The JDK's release file names its version without starting a JVM (which costs a launch ~0.3 s); without one, ask java.
    if { [ -f "$cand/release" ] && grep -Eq '^JAVA_VERSION="25([.-]|")' "$cand/release"; } ||
        { [ ! -f "$cand/release" ] && "$cand/bin/java" -version 2>&1 | head -1 | grep -Eq '"25([.-]|")'; }; then
      export JAVA_HOME="$cand"
      export PATH="$JAVA_HOME/bin:$PATH"
      export MAVEN_OPTS="${MAVEN_OPTS:-} --sun-misc-unsafe-memory-access=allow"
      return 0
    fi
  done
  cat >&2 <<'MSG'
decodiff needs JDK 25 and found none (checked $JAVA_HOME, /usr/lib/jvm/*25*, /opt/java/*25*, ~/.sdkman).
Get one, then run again:
  - Debian/Ubuntu: add the Adoptium apt repository (https://adoptium.net/installation/linux/) and
    `apt-get install temurin-25-jdk`, or
  - SDKMAN: `sdk install java 25-tem`, or
  - unpack any JDK 25 and `export JAVA_HOME=/path/to/jdk-25`.
MSG
  return 1
}
