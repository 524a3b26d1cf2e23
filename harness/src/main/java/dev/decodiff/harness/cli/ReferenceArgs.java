package dev.decodiff.harness.cli;

import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.Home;
import dev.decodiff.harness.compare.ToleranceProfile;
import dev.decodiff.harness.dump.DumpReader;
import dev.decodiff.harness.live.ModelLocator;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import java.nio.file.Files;
import java.nio.file.Path;

/**
 * What every command judged against a reference dump shares (picocli mixin): the REFERENCE positional (the
 * bundled default case when omitted), the checkpoint of a live run, --allow-mismatch and --tolerance, and the
 * one rule that picks the tolerance profile, so compare and bisect can never judge the same cells differently.
 */
public final class ReferenceArgs {
    @Parameters(index = "0", arity = "0..1", paramLabel = "REFERENCE",
            description = "Reference dump folder (default: the bundled case " + Home.DEFAULT_CASE + ").")
    Path reference;

    @Option(names = "--model", paramLabel = "DIR",
            description = "Checkpoint to run (default: the bundled checkpoint whose config and weights hashes match the reference), or a Gemma 4 .gguf file whose weights the engine runs dequantized as ggml does.")
    Path model;

    @Option(names = "--allow-mismatch", description = "Go on even when the two sides come from different checkpoints, tokens or dtypes.")
    boolean allowMismatch;

    @Option(names = "--tolerance", paramLabel = "FILE",
            description = "JSON tolerance profile (docs/tolerances.md). Default: the fp32 defaults, or the built-in bf16 profile for a bfloat16 reference.")
    Path tolerance;

    /** The reference folder: the one named, else the bundled default case (refused when it is missing). */
    public Path dir() {
        if (reference != null) return reference;
        Path dflt = Home.defaultReference();
        if (!Files.exists(dflt)) throw new BadInputException(dflt, "the bundled default case is missing; pass a REFERENCE dump folder");
        return dflt;
    }

    @Option(names = "--allow-faulted-reference",
            description = "Accept a REFERENCE whose producer switched on catalog faults, stored its KV cache in a lossy type or rounded its matrix products (refused by default: a reference must be exact).")
    boolean allowFaultedReference;

    /** Opens the reference, refusing one that is wrong or rounded on purpose unless --allow-faulted-reference. */
    public DumpReader open() {
        var ref = DumpReader.open(dir());
        var p = ref.manifest().producer();
        if (!allowFaultedReference && p != null && (p.faulted() || p.lossyKvCache() || p.lossyMatmul())) {
            String why = p.faulted() ? "was made with catalog faults switched on (" + String.join(",", p.faults()) + ")"
                    : p.lossyKvCache() ? "was made with a lossy KV cache (keys " + p.kvCache().keys() + ", values " + p.kvCache().values() + ")"
                    : "was made with " + p.matmul() + " matrix products (--matmul " + p.matmul() + ")";
            throw new BadInputException(ref.manifestFile(), why + ", so it is no reference for exact numbers; use a clean dump"
                    + " (or pass it as CANDIDATE), or pass --allow-faulted-reference to judge against it anyway");
        }
        return ref;
    }

    /** The tolerance profile: --tolerance when given, else the one the reference's producer dtype calls for. */
    public ToleranceProfile profile(DumpReader ref) {
        if (tolerance == null) return ToleranceProfile.forReference(ref.manifest().producer());
        var profile = ToleranceProfile.load(tolerance);
        profile.checkGlobsMatch(ref.allPoints(), "the reference (" + ref.dir() + ")");
        return profile;
    }

    /** The checkpoint a live run against {@code ref} uses (--model, checked against the reference's hashes, or the bundled one). */
    public ModelLocator.Located locateModel(DumpReader ref) {
        Path m = dev.decodiff.harness.llamacpp.GgufCheckpointCache.isGguf(model) ? dev.decodiff.harness.llamacpp.GgufCheckpointCache.of(model) : model;
        return ModelLocator.locate(m, Home.get(), ref.manifest(), ref.manifestFile(), allowMismatch);
    }

    public Path model() { return model; }

    public boolean allowMismatch() { return allowMismatch; }
}
