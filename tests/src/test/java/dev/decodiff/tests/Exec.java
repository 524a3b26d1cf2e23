package dev.decodiff.tests;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A child process run to its end in a folder, stdout and stderr read whole (stderr on its own thread, so neither pipe
 * fills and blocks the child): the llama.cpp tests start llama.cpp builds and JVMs this way, one llama.cpp per JVM.
 */
record Exec(int code, String out, String err) {
    static Exec run(Path dir, List<String> cmd) throws Exception {
        var p = new ProcessBuilder(new ArrayList<>(cmd)).directory(dir.toFile()).start();
        var err = new StringBuilder();
        var drain = Thread.ofVirtual().start(() -> {
            try {
                err.append(new String(p.getErrorStream().readAllBytes(), StandardCharsets.UTF_8));
            } catch (java.io.IOException e) {
                err.append(e);
            }
        });
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(20, TimeUnit.MINUTES)).as(String.join(" ", cmd)).isTrue();
        drain.join();
        return new Exec(p.exitValue(), out, err.toString());
    }
}
