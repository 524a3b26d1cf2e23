package dev.decodiff.harness;


import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Keeps a command's output away from its inputs: an output equal to, inside, or containing a reference dump or a
 * checkpoint folder is refused, --force or not. Paths are compared after resolving links, so a symlink or a
 * "../" spelling of the same folder is caught too.
 */
public final class OutputPaths {
    private OutputPaths() {}

    public static void refuseOverlap(String option, Path out, Path... inputs) {
        Path o = real(out);
        for (Path in : inputs) {
            if (in == null) continue;
            Path i = real(in);
            String how = o.equals(i) ? "is" : o.startsWith(i) ? "is inside" : i.startsWith(o) ? "contains" : null;
            if (how != null)
                throw new BadInputException(out, option + " " + how + " the input " + in
                        + " and writing there would destroy it (--force does not change that); choose an " + option + " outside it");
        }
    }

    /** The inputs plus the bundled reference dumps and checkpoints, which no command may write into either. */
    public static Path[] withBundledData(Path... inputs) {
        var all = new java.util.ArrayList<Path>(java.util.Arrays.asList(inputs));
        for (String folder : new String[]{"reference-dumps", "checkpoints"}) {
            Path p = dev.decodiff.harness.Home.get().resolve(folder);
            if (Files.isDirectory(p)) all.add(p);
        }
        return all.toArray(Path[]::new);
    }

    /** The real path of p, or of its deepest existing ancestor with the rest appended (p need not exist yet). */
    static Path real(Path p) {
        Path abs = p.toAbsolutePath().normalize();
        Path existing = abs;
        while (existing != null && !Files.exists(existing)) existing = existing.getParent();
        if (existing == null) return abs;
        try {
            return existing.toRealPath().resolve(existing.relativize(abs)).normalize();
        } catch (IOException e) {
            return abs;
        }
    }
}
