package dev.decodiff.harness.arch.gemma4;

import dev.decodiff.harness.live.ObserverCheck;
import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.engine.KvType;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.engine.Probe;
import dev.decodiff.engine.arch.Gemma4Architecture;
import dev.decodiff.engine.arch.LoadedModel;
import dev.decodiff.engine.arch.ModelSession;
import dev.decodiff.harness.arch.BenchModel;
import dev.decodiff.harness.arch.StoredPrefix;
import dev.decodiff.harness.arch.TunableEngine;
import dev.decodiff.harness.arch.gemma4.bisect.Bisector;
import dev.decodiff.harness.bisect.BisectResult;
import dev.decodiff.harness.compare.StreamingCandidate;
import dev.decodiff.harness.compare.ToleranceProfile;
import dev.decodiff.harness.dump.DumpManifest;
import dev.decodiff.harness.dump.DumpReader;
import dev.decodiff.harness.live.EngineSetup;
import dev.decodiff.harness.arch.gemma4.LiveCandidate;
import dev.decodiff.harness.arch.gemma4.selfcheck.SelfCheck;

import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.Set;

/** Gemma 4's engine ({@link Gemma4Model} and its sessions) with every engine option. */
final class Gemma4Engine implements TunableEngine {
    static final Gemma4Engine INSTANCE = new Gemma4Engine();

    private Gemma4Engine() {}

    /** The Gemma 4 model behind the seam; only a model this engine loaded (or the registry's Gemma 4 load) is one. */
    static Gemma4Model model(LoadedModel m) { return ((Gemma4Architecture.Loaded) m).model(); }

    @Override
    public LoadedModel load(Path dir, long decodedTokens) { return Gemma4Architecture.INSTANCE.wrap(Gemma4Model.load(dir, decodedTokens)); }

    @Override
    public LoadedModel load(Path dir) { return Gemma4Architecture.INSTANCE.wrap(Gemma4Model.load(dir)); }

    @Override
    public void checkFits(LoadedModel model, EngineOptions options) { checkKvFits(model(model), options); }

    @Override
    public ModelSession session(LoadedModel model, EngineOptions options, Probe probe) {
        return Gemma4Architecture.session(model(model).newSession(options.withProbe(probe)));
    }

    @Override
    public DumpManifest.Producer producer(LoadedModel model, EngineOptions options, List<String> commandOptions) {
        return producer(options, commandOptions, model(model));
    }

    @Override
    public long kvBytesPerPosition(LoadedModel model, EngineOptions options) { return model(model).newSession(options).kvBytesPerPosition(); }

    @Override
    public StreamingCandidate live(LoadedModel model, EngineOptions options, DumpManifest reference, Set<String> points,
                                   ObserverCheck check) {
        return LiveCandidate.forPoints(model(model), options, reference, points, check);
    }

    @Override
    public BisectResult bisect(LoadedModel model, EngineOptions options, DumpReader reference, ToleranceProfile profile) {
        checkKvFits(model(model), options);
        return new Bisector(model(model), options, reference, profile).run();
    }

    @Override
    public SelfCheckRun selfCheck(LoadedModel model, EngineOptions options) {
        var m = model(model);
        checkKvFits(m, options);
        var check = new SelfCheck(m, options);
        int[] tokens = check.defaultTokens();
        int prompt = check.defaultPromptLength();
        var results = check.runEverything(tokens, prompt);
        return new SelfCheckRun(tokens, prompt, m.config().slidingWindow(), results);
    }

    @Override
    public Optional<BenchModel> benchModel(LoadedModel model) { return Optional.of(new Gemma4BenchModel(model(model))); }

    @Override
    public Optional<StoredPrefix> storedPrefix(LoadedModel model, EngineOptions options, int[] prefix) {
        return Optional.of(Gemma4StoredPrefix.read(model(model), options, prefix));
    }

    /** {@link EngineSetup#producer(EngineOptions, List)} with the quantization of the weights {@code model} runs. */
    static DumpManifest.Producer producer(EngineOptions o, List<String> commandOptions, Gemma4Model model) {
        return EngineSetup.producer(o, commandOptions).withQuantization(EngineSetup.quantization(model.directory(), model.files().declaredQuantization()));
    }

    /**
     * Refuses KV cache types that cannot store this checkpoint's rows (q8_0 and q4_0 quantize blocks of 32 values,
     * so every layer's nkv·d must be a multiple of 32) as bad input, before any session is built.
     */
    static void checkKvFits(Gemma4Model model, EngineOptions o) {
        var c = model.config();
        for (var type : List.of(o.keyType(), o.valueType())) {
            if (type == KvType.F32 || type == KvType.BF16) continue;
            for (int i = 0; i < c.numLayers(); i++) {
                var l = c.layer(i);
                int row = l.kvHeads() * l.headDim();
                if (row % KvType.BLOCK != 0)
                    throw new BadInputException(model.directory(), "--kv-cache " + type.id() + " stores rows in blocks of " + KvType.BLOCK
                            + " values, but layer " + i + " has rows of nkv·d = " + row + "; use f32 or bf16 with this checkpoint");
            }
        }
    }
}
