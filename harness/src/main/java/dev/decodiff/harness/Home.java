package dev.decodiff.harness;

import java.nio.file.Files;
import java.nio.file.Path;

/** Where decodiff's bundled checkpoints and reference dumps live: -Ddecodiff.home (set by ./decodiff), else upwards from here. */
public final class Home {
    public static final String DEFAULT_CASE = "reference-dumps/gemma4-tiny/long";

    private Home() {}

    public static Path get() {
        String h = System.getProperty("decodiff.home");
        if (h != null && !h.isBlank()) return Path.of(h);
        Path p = Path.of("").toAbsolutePath();
        for (Path q = p; q != null; q = q.getParent())
            if (Files.isDirectory(q.resolve("reference-dumps")) && Files.isRegularFile(q.resolve("decodiff"))) return q;
        return p;
    }

    public static Path defaultReference() { return get().resolve(DEFAULT_CASE); }

    /** decodiff's version, from the build ("dev" when run from classes without it). */
    public static String version() {
        try (var in = Home.class.getResourceAsStream("/decodiff-version.properties")) {
            if (in == null) return "dev";
            var p = new java.util.Properties();
            p.load(in);
            return p.getProperty("version", "dev");
        } catch (java.io.IOException e) {
            return "dev";
        }
    }
}
