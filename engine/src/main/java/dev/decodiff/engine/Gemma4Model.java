package dev.decodiff.engine;

import java.nio.file.Files;
import java.nio.file.Path;

/** A loaded Gemma 4 text checkpoint: config, weights (mapped, or copied onto huge pages), RoPE tables. Sessions run the forward pass. */
public final class Gemma4Model implements AutoCloseable {
    private final Path dir;
    private final Gemma4Config config;
    private final CheckpointFiles files;
    private final ModelWeights weights;
    private final WeightResidency residency;
    private final Rope slidingRope;
    private final Rope fullRope;
    private String weightsSha256;

    private Gemma4Model(Path dir, Gemma4Config config, CheckpointFiles files, WeightResidency.Placed<ModelWeights> placed) {
        this.dir = dir;
        this.config = config;
        this.files = files;
        this.weights = placed.weights();
        this.residency = placed.residency();
        int slidingDim = 0, fullDim = 0;
        for (var l : config.layers()) {
            if (l.type() == LayerType.SLIDING) slidingDim = l.headDim();
            else fullDim = l.headDim();
        }
        this.slidingRope = slidingDim > 0 ? new Rope(config.slidingRope(), slidingDim) : null;
        this.fullRope = fullDim > 0 ? new Rope(config.fullRope(), fullDim) : null;
        for (var l : config.layers()) {
            int want = l.type() == LayerType.SLIDING ? slidingDim : fullDim;
            if (l.headDim() != want)
                throw new CheckpointException(dir + "/config.json: layers of one type must share a head dim (layer " + l.index() + ")");
        }
    }

    public static Gemma4Model load(Path dir) { return load(dir, WeightResidency.configured(), -1); }

    /**
     * Loads for a run that will decode {@code decodeTokens} tokens after its prompt: where that is few, the weights
     * stay in the file mapping rather than being copied onto huge pages (see {@link WeightResidency}).
     */
    public static Gemma4Model load(Path dir, long decodeTokens) { return load(dir, WeightResidency.configured(), decodeTokens); }

    /** Loads with the weights placed as {@code placement} says (tests compare placements). */
    static Gemma4Model load(Path dir, WeightResidency.Mode placement) { return load(dir, placement, -1); }

    /** Loads with the weights placed as {@code placement} says for a run of {@code decodeTokens} decode tokens (-1: unknown). */
    static Gemma4Model load(Path dir, WeightResidency.Mode placement, long decodeTokens) {
        Path cfg = dir.resolve("config.json");
        if (!Files.isRegularFile(cfg)) throw new CheckpointException(dir + ": no config.json — point --model at a Hugging Face checkpoint folder");
        var config = Gemma4Config.read(cfg);
        var files = CheckpointFiles.open(dir);
        try {
            var mapped = ModelWeights.load(files, config);
            // the per-layer table is looked up a row per token: readahead around each row would read most of it
            if (mapped.pleEmbed() != null) mapped.pleEmbed().adviseLookups(null);
            return new Gemma4Model(dir, config, files, WeightResidency.place(mapped, placement, decodeTokens));
        } catch (RuntimeException e) {
            files.close();
            throw e;
        }
    }

    public Path directory() { return dir; }

    public Gemma4Config config() { return config; }

    public ModelWeights weights() { return weights; }

    public CheckpointFiles files() { return files; }

    /** Where the streamed weights are read from (the file mapping or a huge-page copy), in one line. */
    public String weightPlacement() { return residency.description(); }

    /** Whether the streamed weights are read from a huge-page copy rather than the file mapping. */
    public boolean weightsResident() { return residency.resident(); }

    public Rope rope(LayerType t) { return t == LayerType.SLIDING ? slidingRope : fullRope; }

    public String configSha256() { return CheckpointFiles.sha256(dir.resolve("config.json")); }

    public synchronized String weightsSha256() {
        if (weightsSha256 == null) weightsSha256 = files.weightsSha256();
        return weightsSha256;
    }

    /** Bytes of weights a single-token decode step reads (every matrix once, the head once; embeddings: one row). */
    public long weightBytesPerToken() {
        long b = weights.lmHead().bytes();
        for (var l : weights.layers()) {
            b += l.q().bytes() + l.o().bytes() + l.gate().bytes() + l.up().bytes() + l.down().bytes();
            if (l.k() != null) b += l.k().bytes();
            if (l.v() != null) b += l.v().bytes();
            if (l.pleGate() != null) b += l.pleGate().bytes() + l.pleProjection().bytes();
            if (l.moe() != null) {
                b += l.moe().router().bytes();
                b += (long) config.topKExperts() * (l.moe().gate()[0].bytes() + l.moe().up()[0].bytes() + l.moe().down()[0].bytes());
            }
        }
        if (weights.pleModelProjection() != null) b += weights.pleModelProjection().bytes();
        return b;
    }

    public InferenceSession newSession(EngineOptions options) { return new InferenceSession(this, options); }

    public InferenceSession newSession() { return newSession(EngineOptions.defaults()); }

    @Override
    public void close() {
        try {
            residency.close();
        } finally {
            files.close();
        }
    }
}
