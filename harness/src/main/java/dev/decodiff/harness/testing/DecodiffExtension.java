package dev.decodiff.harness.testing;

import dev.decodiff.engine.arch.Architectures;
import dev.decodiff.engine.arch.LoadedModel;
import dev.decodiff.harness.arch.ArchitectureSupports;
import dev.decodiff.harness.Home;
import dev.decodiff.harness.dump.DumpReader;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolutionException;
import org.junit.jupiter.api.extension.ParameterResolver;

import java.nio.file.Files;
import java.nio.file.Path;

/**
 * JUnit 5 extension that injects bundled references and checkpoints by annotation:
 * <pre>{@code
 * @ExtendWith(DecodiffExtension.class)
 * class GoldenTest {
 *     @Test
 *     void tinyMatches(@Checkpoint("gemma4-tiny") EngineRun run, @Reference("gemma4-tiny/long") ReferenceDump ref) {
 *         assertThat(run).matchesReference(ref);
 *     }
 * }
 * }</pre>
 * A {@code @Checkpoint} folder of any bundled architecture (picked by its config.json) resolves as {@link LoadedModel},
 * {@link EngineRun} or {@link Path}, and as its family's own engine model type where the family has one (Gemma 4's
 * model class). Paths resolve against the decodiff home (-Ddecodiff.home, else the first folder upwards with
 * reference-dumps/).
 */
public final class DecodiffExtension implements ParameterResolver {
    private static final ExtensionContext.Namespace NS = ExtensionContext.Namespace.create(DecodiffExtension.class);

    @Override
    public boolean supportsParameter(ParameterContext pc, ExtensionContext ec) {
        Class<?> t = pc.getParameter().getType();
        if (pc.isAnnotated(Reference.class)) return t == ReferenceDump.class || t == DumpReader.class || t == Path.class;
        if (pc.isAnnotated(Checkpoint.class))
            return t == LoadedModel.class || t == EngineRun.class || t == Path.class || ArchitectureSupports.isOwnModelType(t);
        return false;
    }

    @Override
    public Object resolveParameter(ParameterContext pc, ExtensionContext ec) {
        Class<?> t = pc.getParameter().getType();
        if (pc.isAnnotated(Reference.class)) {
            Path dir = resolve("reference-dumps", pc.findAnnotation(Reference.class).orElseThrow().value());
            if (t == Path.class) return dir;
            var reader = ec.getRoot().getStore(NS).getOrComputeIfAbsent("ref:" + dir.toAbsolutePath().normalize(),
                    k -> DumpReader.open(dir), DumpReader.class);
            return t == DumpReader.class ? reader : new ReferenceDump(reader);
        }
        Path dir = resolve("checkpoints", pc.findAnnotation(Checkpoint.class).orElseThrow().value());
        if (t == Path.class) return dir;
        var store = ec.getRequiredTestClass() == null ? ec.getRoot().getStore(NS) : classContext(ec).getStore(NS);
        var holder = store.getOrComputeIfAbsent("model:" + dir.toAbsolutePath().normalize(), k -> new ModelHolder(Architectures.load(dir)), ModelHolder.class);
        var model = holder.model;
        if (t == LoadedModel.class) return model;
        if (t == EngineRun.class) return EngineRun.of(model);
        var own = ArchitectureSupports.of(model.architecture()).ownModel().filter(o -> o.type() == t).orElseThrow(() ->
                new ParameterResolutionException(dir + " is a " + model.architecture().name() + " checkpoint, which a " + t.getSimpleName()
                        + " parameter cannot hold; take it as LoadedModel or EngineRun"));
        return own.unwrap().apply(model);
    }

    private static ExtensionContext classContext(ExtensionContext ec) {
        var c = ec;
        while (c.getParent().isPresent() && c.getTestMethod().isPresent()) c = c.getParent().get();
        return c;
    }

    static Path resolve(String folder, String name) {
        Path p = name.startsWith("/") || name.startsWith("./") ? Path.of(name) : Home.get().resolve(folder).resolve(name);
        if (!Files.isDirectory(p))
            throw new ParameterResolutionException(p + ": no such folder; bundled " + folder + " live under " + Home.get().resolve(folder));
        return p;
    }

    /** Closes the model when the test class's store is closed. */
    private record ModelHolder(LoadedModel model) implements ExtensionContext.Store.CloseableResource {
        @Override
        public void close() { model.close(); }
    }
}
