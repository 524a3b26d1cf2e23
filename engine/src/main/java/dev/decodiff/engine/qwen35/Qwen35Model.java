package dev.decodiff.engine.qwen35;

import dev.decodiff.engine.CheckpointException;
import dev.decodiff.engine.CheckpointFiles;
import dev.decodiff.engine.Probe;

import java.nio.file.Path;

/** A loaded Qwen3.5 text model (dense or MoE): config, weights and the RoPE table, shared by its sessions. */
public final class Qwen35Model implements AutoCloseable {
    private final Path dir;
    private final Qwen35Config config;
    private final CheckpointFiles files;
    private final Qwen35Weights weights;
    private final dev.decodiff.engine.WeightResidency residency;
    private final float[] invFreq;
    private final Qwen35Ops ops;

    private Qwen35Model(Path dir, Qwen35Config config, CheckpointFiles files, dev.decodiff.engine.WeightResidency.Placed<Qwen35Weights> placed) {
        this.dir = dir;
        this.config = config;
        this.files = files;
        this.weights = placed.weights();
        this.residency = placed.residency();
        this.invFreq = dev.decodiff.engine.Rope.inverseFrequencies(dev.decodiff.engine.RopeSpec.defaultRope(config.ropeTheta()), config.rotaryDim());
        this.ops = new Qwen35Ops(this);
    }

    /** The model's ops (the forward's and attribution's one description of its math). */
    public Qwen35Ops ops() { return ops; }

    public static Qwen35Model load(Path dir) { return load(dir, -1); }

    /**
     * Loads for a run that will decode {@code decodeTokens} tokens after its prompt (-1: unknown). The streamed
     * matrices are placed as Gemma 4's are ({@link dev.decodiff.engine.WeightResidency}): under the default policy
     * copied onto huge pages when the run decodes enough for the copy to pay, else read from the file mapping.
     */
    public static Qwen35Model load(Path dir, long decodeTokens) {
        return load(dir, dev.decodiff.engine.WeightResidency.configured(), decodeTokens);
    }

    /** {@link #load(Path, long)} under the placement policy {@code mode} rather than the configured one. */
    public static Qwen35Model load(Path dir, dev.decodiff.engine.WeightResidency.Mode mode, long decodeTokens) {
        var config = Qwen35Config.read(dir.resolve("config.json"));
        var files = CheckpointFiles.open(dir);
        try {
            // MLX affine conversions load as Gemma 4's do: 4- and 8-bit matrices stay packed (CheckpointFiles#matrix) and run
            // on the exact integer kernels; the other tensors (norms, conv, A_log, dt_bias) are stored as floats
            var mapped = Qwen35Weights.load(files, config);
            return new Qwen35Model(dir, config, files, dev.decodiff.engine.WeightResidency.place(mapped, mapped::withStreamedMatrices, mode, decodeTokens));
        } catch (RuntimeException e) {
            files.close();
            throw e;
        }
    }

    public Path directory() { return dir; }

    public Qwen35Config config() { return config; }

    /** Where the streamed weights are read from (the file mapping or a huge-page copy), in one line. */
    public String weightPlacement() { return residency.description(); }

    public Qwen35Weights weights() { return weights; }

    public CheckpointFiles files() { return files; }

    /** inv_freq[i] = 1/θ^(2i/R) over the R rotary dims, in fp32 as transformers forms it. */
    float[] invFreq() { return invFreq; }

    public String configSha256() { return CheckpointFiles.sha256(dir.resolve("config.json")); }

    public String weightsSha256() { return files.weightsSha256(); }

    /**
     * Bytes of weights a single-token decode step reads: every matrix once (a MoE layer: the router, the shared expert
     * and top-k experts), the head once; the embedding only one row, so not counted where the head is untied.
     */
    public long weightBytesPerToken() {
        long b = weights.lmHead().bytes();
        for (var l : weights.layers()) {
            b += switch (l.mixer()) {
                case Qwen35Weights.Linear lin -> lin.inProjQkv().bytes() + lin.inProjZ().bytes() + lin.inProjB().bytes() + lin.inProjA().bytes()
                        + lin.outProj().bytes();
                case Qwen35Weights.Full f -> f.q().bytes() + f.k().bytes() + f.v().bytes() + f.o().bytes();
            };
            b += switch (l.ffn()) {
                case Qwen35Weights.Dense d -> d.gate().bytes() + d.up().bytes() + d.down().bytes();
                case Qwen35Weights.Moe m -> m.router().bytes() + m.shared().gate().bytes() + m.shared().up().bytes() + m.shared().down().bytes()
                        + (long) config.topK() * (m.gate()[0].bytes() + m.up()[0].bytes() + m.down()[0].bytes());
            };
        }
        return b;
    }

    public Qwen35Session newSession(Probe probe) { return new Qwen35Session(this, probe, java.util.Set.of()); }

    /** A session with catalog faults switched on. */
    public Qwen35Session newSession(Probe probe, java.util.Set<Qwen35Fault> faults) { return new Qwen35Session(this, probe, faults); }

    @Override
    public void close() {
        try {
            residency.close();
        } finally {
            files.close();
        }
    }
}
