package dev.decodiff.llamacpp.ffi;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * Where llama.cpp lives on this machine: the folder of its shared libraries and, near it, the headers it was built
 * from. Found from {@code -Ddecodiff.llamacpp.lib}, then {@code $DECODIFF_LLAMACPP_LIB} (any build of the source the
 * bindings are written for: the prebuilt package, scripts/llamacpp-native.sh's build, or the user's own cmake build
 * folder), then scripts/llamacpp.sh's cache. A prebuilt folder names its libraries {@code libllama.v0.5.0.so} and loads
 * its CPU backend at run time; a native build names them {@code libllama.so} with the CPU backend linked in.
 */
public record LlamaCppHome(Path lib) {
    /** The node-llama-cpp version the bindings are written for (it ships llama.cpp {@link #RELEASE}). */
    public static final String PACKAGE_VERSION = "3.22.1";
    /** The llama.cpp release inside that package. */
    public static final String RELEASE = "v0.5.0";
    public static final String PROPERTY = "decodiff.llamacpp.lib";
    public static final String ENV = "DECODIFF_LLAMACPP_LIB";
    /** The file names each library has in a prebuilt package or in a cmake build, tried in this order. */
    static final List<String> LIBLLAMA = List.of("libllama.v0.5.0.so", "libllama.so"),
            LIBGGML = List.of("libggml.v0.5.0.so", "libggml.so"), LIBGGML_BASE = List.of("libggml-base.so");

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
        if (!Files.isDirectory(lib))
            throw new LlamaCppException("llama.cpp library folder " + lib + " (from " + from + ") does not exist; point " + from
                    + " at the folder that holds libllama.so (a cmake build's bin/), or unset it to use scripts/llamacpp.sh's release");
        for (var names : List.of(LIBLLAMA, LIBGGML, LIBGGML_BASE)) {
            if (find(lib, names) == null)
                throw new LlamaCppException("no " + String.join(" or ", names) + " in " + lib + " (llama.cpp library folder from " + from
                        + "); point " + from + " at the folder that holds libllama.so (a cmake build's bin/), or unset it to use scripts/llamacpp.sh's release");
        }
        return new LlamaCppHome(lib.toAbsolutePath().normalize());
    }

    private static Path find(Path lib, List<String> names) {
        for (String n : names) if (Files.isReadable(lib.resolve(n))) return lib.resolve(n);
        return null;
    }

    public Path libllama() { return find(lib, LIBLLAMA); }

    public Path libggml() { return find(lib, LIBGGML); }

    public Path libggmlBase() { return find(lib, LIBGGML_BASE); }

    /** How this folder was built: the prebuilt package, scripts/llamacpp-native.sh, or someone's own build. */
    public enum Kind {
        PREBUILT("prebuilt (node-llama-cpp " + PACKAGE_VERSION + ")"), NATIVE("native (scripts/llamacpp-native.sh)"), OWN("own build");

        public final String label;

        Kind(String label) { this.label = label; }
    }

    public Kind kind() {
        if (Files.exists(lib.resolve("_nlcBuildMetadata.json"))) return Kind.PREBUILT;
        if (Files.exists(lib.resolve(NATIVE_BUILD_INFO))) return Kind.NATIVE;
        return Kind.OWN;
    }

    /** What scripts/llamacpp-native.sh writes beside the libraries: how they were built (source, cmake flags, compiler, patch). */
    public static final String NATIVE_BUILD_INFO = "decodiff-build.txt";

    /** The lines of {@link #NATIVE_BUILD_INFO} as key → value, empty for another build. */
    public java.util.Map<String, String> buildInfo() {
        var info = new java.util.LinkedHashMap<String, String>();
        try {
            for (String line : Files.readAllLines(lib.resolve(NATIVE_BUILD_INFO))) {
                int colon = line.indexOf(": ");
                if (colon > 0) info.put(line.substring(0, colon), line.substring(colon + 2));
            }
        } catch (java.io.IOException e) {
            // not a native build of ours
        }
        return info;
    }

    /** llama.cpp's own llama-bench beside the libraries (a cmake build puts it there), if any. */
    public java.util.Optional<Path> llamaBench() {
        var p = lib.resolve("llama-bench");
        return Files.isExecutable(p) ? java.util.Optional.of(p) : java.util.Optional.empty();
    }

    /**
     * The sources beside the libraries of the caches (include/, ggml/include/, src/models/gemma4.cpp). The struct
     * layouts are read from {@link #headers()}, which also finds a cmake build's source tree.
     */
    public Path sources() { return lib.resolveSibling("src"); }

    /** The folders holding llama.h and ggml.h that these libraries were built from. */
    public record Headers(Path llama, Path ggml) {}

    /**
     * Where llama.h and ggml.h are: {@code -Ddecodiff.llamacpp.include} (or {@code $DECODIFF_LLAMACPP_INCLUDE}) if set;
     * else the caches' {@code ../src}; a cmake build folder inside its source tree ({@code <tree>/build/bin}); or an
     * install prefix ({@code <prefix>/lib} beside {@code <prefix>/include}).
     */
    public java.util.Optional<Headers> headers() {
        String configured = System.getProperty(INCLUDE_PROPERTY, System.getenv(INCLUDE_ENV));
        var candidates = new java.util.ArrayList<Path>();
        if (configured != null && !configured.isBlank()) {
            var inc = Path.of(configured).toAbsolutePath();
            if (Files.exists(inc.resolve("llama.h")) && Files.exists(inc.resolve("ggml.h"))) return java.util.Optional.of(new Headers(inc, inc));
            if (inc.getParent() != null) candidates.add(inc.getParent());
        } else {
            candidates.add(sources());
            for (Path p = lib.getParent(); p != null && candidates.size() < 5; p = p.getParent()) candidates.add(p);
        }
        for (Path root : candidates) {
            var llama = root.resolve("include");
            if (!Files.exists(llama.resolve("llama.h"))) continue;
            if (Files.exists(root.resolve("ggml/include/ggml.h"))) return java.util.Optional.of(new Headers(llama, root.resolve("ggml/include")));
            if (Files.exists(llama.resolve("ggml.h"))) return java.util.Optional.of(new Headers(llama, llama));
        }
        return java.util.Optional.empty();
    }

    public static final String INCLUDE_PROPERTY = "decodiff.llamacpp.include", INCLUDE_ENV = "DECODIFF_LLAMACPP_INCLUDE";
}
