package dev.decodiff.harness.live;

import dev.decodiff.engine.CheckpointFiles;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.dump.DumpManifest;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/** Finds checkpoints and checks that a checkpoint is the one a reference dump was made from (docs/dump-format.md hashes). */
public final class ModelLocator {
    private ModelLocator() {}

    /** A checkpoint's hashes and the quantization its config.json declares (null: float weights). */
    public record Identity(String configSha256, String weightsSha256, DumpManifest.Quantization quantization) {}

    /**
     * Hashes of a checkpoint folder: config.json's bytes, and the *.safetensors bytes in file-name order (a large
     * checkpoint's remembered while its shards are unchanged: {@link WeightsHashCache}).
     */
    public static Identity identity(Path dir) {
        Path cfg = dir.resolve("config.json");
        if (!Files.isRegularFile(cfg)) throw new BadInputException(dir, "has no config.json; --model needs a Hugging Face checkpoint folder");
        String c = CheckpointFiles.sha256(cfg);
        try (var f = CheckpointFiles.open(dir)) {
            return new Identity(c, WeightsHashCache.weightsSha256(dir, f), EngineSetup.quantization(dir, f.declaredQuantization()));
        }
    }

    /** The bundled checkpoints: folders under checkpoints/ that hold a config.json. */
    public static List<Path> bundled(Path home) {
        Path root = home.resolve("checkpoints");
        var out = new ArrayList<Path>();
        if (!Files.isDirectory(root)) return out;
        try (var s = Files.list(root)) {
            s.filter(p -> Files.isRegularFile(p.resolve("config.json"))).sorted().forEach(out::add);
        } catch (IOException e) {
            throw new BadInputException(root, "cannot list: " + e.getMessage());
        }
        return out;
    }

    /** The bundled checkpoint whose config and weights hashes equal the reference manifest's. */
    /** The checkpoint a live run uses, and a note when it was accepted despite a mismatch. */
    public record Located(Path dir, String note) {}

    /**
     * The checkpoint for a live run against a reference: the one the user named (checked against the reference's
     * hashes; a mismatch is bad input unless allowed), else the bundled one whose hashes match.
     */
    public static Located locate(Path explicit, Path home, DumpManifest ref, Path refManifest, boolean allowMismatch) {
        if (explicit == null) return new Located(bundledFor(home, ref, refManifest), null);
        return new Located(explicit, check(explicit, identity(explicit), ref, refManifest, allowMismatch));
    }

    /** The bundled GGUF files: checkpoints/gguf/*.gguf. */
    public static List<Path> bundledGgufs(Path home) {
        Path root = home.resolve("checkpoints").resolve("gguf");
        var out = new ArrayList<Path>();
        if (!Files.isDirectory(root)) return out;
        try (var s = Files.list(root)) {
            s.filter(p -> Files.isRegularFile(p) && dev.decodiff.harness.llamacpp.GgufCheckpointCache.isGguf(p)).sorted().forEach(out::add);
        } catch (IOException e) {
            throw new BadInputException(root, "cannot list: " + e.getMessage());
        }
        return out;
    }

    public static Path bundledFor(Path home, DumpManifest ref, Path refManifest) {
        var m = ref.model();
        var dirs = new ArrayList<>(bundled(home));
        // a reference of a GGUF names the folder decodiff makes of it; the bundled GGUFs are converted (once, cached)
        // only for such a reference
        var q = ref.producer() == null ? null : ref.producer().quantization();
        if (q != null && "gguf".equals(q.format()))
            for (Path g : bundledGgufs(home)) dirs.add(dev.decodiff.harness.llamacpp.GgufCheckpointCache.of(g));
        for (Path dir : dirs) {
            if (!m.configSha256().equals(CheckpointFiles.sha256(dir.resolve("config.json")))) continue;
            if (m.weightsSha256() == null || m.weightsSha256().equals(identity(dir).weightsSha256())) return dir;
        }
        throw new BadInputException(refManifest, "was made from a checkpoint that is not bundled (config_sha256 "
                + m.configSha256().substring(0, 12) + "…, none of " + bundled(home).size() + " folders under "
                + home.resolve("checkpoints") + " matches); pass --model DIR, or give a CANDIDATE dump");
    }

    /** Checks --model against the reference; returns a note when allowMismatch lets a mismatch through. */
    public static String check(Path modelDir, Identity id, DumpManifest ref, Path refManifest, boolean allowMismatch) {
        var m = ref.model();
        String what = null;
        var rp = ref.producer();
        if (rp != null && rp.statesQuantization() && !Objects.equals(rp.quantization(), id.quantization()))
            what = "runs " + DumpManifest.weights(id.quantization()) + ", but the reference (" + refManifest + ") ran "
                    + DumpManifest.weights(rp.quantization()) + ": a different model";
        else if (!Objects.equals(m.configSha256(), id.configSha256()))
            what = "config.json differs from the reference's checkpoint (config_sha256 " + id.configSha256().substring(0, 12)
                    + "… vs " + m.configSha256().substring(0, 12) + "… in " + refManifest + ")";
        else if (m.weightsSha256() != null && !m.weightsSha256().equals(id.weightsSha256()))
            what = "weights differ from the reference's checkpoint (weights_sha256 " + id.weightsSha256().substring(0, 12)
                    + "… vs " + m.weightsSha256().substring(0, 12) + "… in " + refManifest + ")";
        if (what == null) return null;
        if (!allowMismatch) throw new BadInputException(modelDir, what + "; use the checkpoint the reference was made from, or pass --allow-mismatch");
        return modelDir + ": " + what + " (compared anyway: --allow-mismatch)";
    }
}
