package dev.decodiff.harness.cli;

import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.Home;
import dev.decodiff.harness.dump.DumpReader;
import dev.decodiff.harness.live.ModelLocator;

import java.nio.file.Path;
import java.util.List;

/**
 * The checkpoint local attribution of two dumps recomputes with: --model (checked against the reference's hashes),
 * else the bundled checkpoint the reference was made from; without either, attribution is off and the report says
 * how to switch it on.
 */
final class AttributionModel {
    private AttributionModel() {}

    /** Recomputing another model's ops would attribute nothing about the reference's: attribution is off. */
    static final String OFF_OTHER_MODEL = "no local attribution: the checkpoint is not the reference's, so its ops recomputed say nothing about"
            + " the reference's model — each cell is judged by its accumulated error";

    static Path locate(ReferenceArgs args, DumpReader ref, List<String> notes) {
        if (args.model() != null) {
            String note = ModelLocator.check(args.model(), ModelLocator.identity(args.model()), ref.manifest(), ref.manifestFile(), args.allowMismatch());
            if (note == null) return args.model();
            notes.add(note);
            notes.add(OFF_OTHER_MODEL);
            return null;
        }
        try {
            Path dir = ModelLocator.bundledFor(Home.get(), ref.manifest(), ref.manifestFile());
            notes.add("local attribution recomputes each op with the bundled checkpoint " + Home.get().relativize(dir) + " (the reference's weights hash)");
            return dir;
        } catch (BadInputException e) {
            notes.add("no local attribution: the checkpoint is not bundled, so each cell's own error cannot be separated from what it inherits"
                    + " — pass --model CKPT (the reference's checkpoint) to name the real divergence behind any precision drift");
            return null;
        }
    }
}
