package dev.decodiff.harness.ops;

/**
 * Starts the ND4J oracle. The implementation class is looked up by name, so that no class the rest of the CLI
 * loads refers to it: ND4J (and its ~3 s native start) is paid only by {@code decodiff ops}.
 */
public final class OracleLoader {
    static final String IMPLEMENTATION = "dev.decodiff.harness.ops.Nd4jOracle";

    private OracleLoader() {}

    public static Oracle nd4j() {
        try {
            return (Oracle) Class.forName(IMPLEMENTATION).getConstructor().newInstance();
        } catch (java.lang.reflect.InvocationTargetException e) {
            throw unavailable(e.getCause() != null ? e.getCause() : e);
        } catch (ReflectiveOperationException | LinkageError | RuntimeException e) {
            throw unavailable(e);
        }
    }

    private static OracleUnavailableException unavailable(Throwable e) {
        Throwable root = e;
        while (root.getCause() != null && root.getCause() != root) root = root.getCause();
        String why = root == e ? e.toString() : e + " (cause: " + root + ")";
        return new OracleUnavailableException("ND4J, the oracle of `decodiff ops`, could not be loaded: " + why
                + ". It needs org.nd4j:nd4j-native and nd4j-native:<platform> (linux-x86_64 by default; other platforms: build with"
                + " -Dnd4j.classifier=…) in harness/target/lib, and its native library unpacks into ~/.javacpp/cache"
                + " (set -Dorg.bytedeco.javacpp.cachedir=DIR if that is not writable). Nothing else in decodiff needs ND4J.", e);
    }
}
