package dev.decodiff.harness.cli;

import java.lang.management.ManagementFactory;

/**
 * Whether this JVM started from the launcher's startup cache (the JDK's AOT cache, scripts/startup-cache.sh). The JVM
 * says nothing when it cannot use a cache (the launcher turns its AOT logging off, since it would print on stdout);
 * it then runs without class sharing, which java.vm.info shows.
 */
public final class StartupCache {
    private StartupCache() {}

    /** The cache this JVM was given (-XX:AOTCache=), or null. */
    static String given() {
        String cache = null;
        for (String a : ManagementFactory.getRuntimeMXBean().getInputArguments())
            if (a.startsWith("-XX:AOTCache=")) cache = a.substring("-XX:AOTCache=".length());
        return cache;
    }

    /** Whether this JVM was given a startup cache and mapped it. */
    public static boolean inUse() { return given() != null && System.getProperty("java.vm.info", "").contains("sharing"); }

    /** For {@code --version}. */
    static String status() {
        String cache = given();
        if (cache == null) return "none (./decodiff makes one per build and starts the JVM with it)";
        if (inUse()) return "in use (" + cache + ")";
        return cache + " not used (made from other jars or by another JDK, which ./decodiff mends at the next start, or -XX:AOTMode=off)";
    }
}
