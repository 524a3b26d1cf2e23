package dev.decodiff.llamacpp.ffi;

import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Where the pinned llama.cpp lives on this machine: the folder of its shared libraries (what scripts/llamacpp.sh
 * prints) and, beside it, the sources it was built from (headers, the Gemma 4 graph). Found from
 * {@code -Ddecodiff.llamacpp.lib}, then {@code $DECODIFF_LLAMACPP_LIB}, then the script's cache folder.
 */
public record LlamaCppHome(Path lib) {
    /** The node-llama-cpp version the bindings are written for (it ships llama.cpp {@link #RELEASE}). */
    public static final String PACKAGE_VERSION = "3.22.1";
    /** The llama.cpp release inside that package. */
    public static final String RELEASE = "v0.5.0";
    public static final String PROPERTY = "decodiff.llamacpp.lib";
    public static final String ENV = "DECODIFF_LLAMACPP_LIB";
    static final String LIBLLAMA = "libllama.v0.5.0.so", LIBGGML = "libggml.v0.5.0.so", LIBGGML_BASE = "libggml-base.so";

    /** decodiff's folder in the user's cache: ${XDG_CACHE_HOME:-~/.cache}/decodiff. */
    public static Path userCache() {
        String xdg = System.getenv("XDG_CACHE_HOME");
        Path base = xdg != null && !xdg.isBlank() ? Path.of(xdg) : Path.of(System.getProperty("user.home"), ".cache");
        return base.resolve("decodiff");
    }

    /** The folder the set-up script caches into. */
    public static Path defaultCache() { return userCache().resolve("llama.cpp-" + PACKAGE_VERSION); }

    /** The configured or cached llama.cpp, or an error saying how to get it. */
    public static LlamaCppHome locate() {
        String configured = System.getProperty(PROPERTY);
        String from = "-D" + PROPERTY;
        if (configured == null || configured.isBlank()) {
            configured = System.getenv(ENV);
            from = "$" + ENV;
        }
        if (configured != null && !configured.isBlank()) return check(Path.of(configured), from);
        Path cache = defaultCache();
        if (!isComplete(cache))
            throw new LlamaCppException("llama.cpp " + RELEASE + " is not set up on this machine (looked in " + cache
                    + "); run scripts/llamacpp.sh once (it fetches node-llama-cpp " + PACKAGE_VERSION + " with npm), then try again");
        return check(cache.resolve("lib"), "the cache of scripts/llamacpp.sh");
    }

    /**
     * Whether this run must have llama.cpp: a library folder was configured (./run-tests does), so its absence is an
     * error rather than a reason to skip the llama.cpp tests.
     */
    public static boolean configured() {
        return System.getProperty(PROPERTY) != null || System.getenv(ENV) != null;
    }

    /** Whether {@link #locate()} would find a llama.cpp (without loading it). */
    public static boolean available() {
        try {
            locate();
            return true;
        } catch (LlamaCppException e) {
            return false;
        }
    }

    /** The layout of the cache scripts/llamacpp.sh writes (the number in its .complete file). */
    static final String CACHE_LAYOUT = "2";

    private static boolean isComplete(Path cache) {
        try {
            return Files.readString(cache.resolve(".complete")).strip().equals(CACHE_LAYOUT);
        } catch (java.io.IOException e) {
            return false;
        }
    }

    private static LlamaCppHome check(Path lib, String from) {
        for (String f : new String[]{LIBLLAMA, LIBGGML, LIBGGML_BASE}) {
            if (!Files.isReadable(lib.resolve(f)))
                throw new LlamaCppException(lib.resolve(f) + " is missing (llama.cpp library folder from " + from
                        + "); run scripts/llamacpp.sh to set up llama.cpp " + RELEASE + ", or point " + from + " at its lib folder");
        }
        return new LlamaCppHome(lib.toAbsolutePath().normalize());
    }

    /** The sources the libraries were built from (include/, ggml/include/, src/models/gemma4.cpp), if cached. */
    public Path sources() { return lib.resolveSibling("src"); }
}
