package dev.decodiff.tests;

import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/** The launcher's stderr filter (scripts/stderr-filter.sh): the JVM's incubator notice goes, everything else stays. */
class LauncherStderrTest {
    private static String filter(String stderr) throws Exception {
        var script = ReferenceCases.repoRoot().resolve("scripts/stderr-filter.sh");
        var p = new ProcessBuilder(List.of("bash", "-c", ". '" + script + "'; drop_incubator_notice")).start();
        try (var in = p.getOutputStream()) {
            in.write(stderr.getBytes(StandardCharsets.UTF_8));
        }
        assertThat(p.waitFor(30, TimeUnit.SECONDS)).isTrue();
        return new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    }

    @Test
    void theIncubatorNoticeIsDroppedAndOtherWarningsAndOutputPassUnchanged() throws Exception {
        String notice = "WARNING: Using incubator modules: jdk.incubator.vector\n";
        String vm = "OpenJDK 64-Bit Server VM warning: Options -Xverify:none and -noverify were deprecated\n";
        String rest = "WARNING: A restricted method in java.lang.System has been called\ndecodiff: x: does not exist\n\rcomparing  3/21";
        assertThat(filter(notice + rest)).isEqualTo(rest);
        assertThat(filter(vm + notice + rest)).isEqualTo(vm + rest);
        // without the notice nothing is lost either, the progress bar's unterminated line included
        assertThat(filter(rest)).isEqualTo(rest);
        // a second identical line later is the program's own output, not the JVM's notice: it stays
        assertThat(filter(notice + "decodiff: x\n" + notice)).isEqualTo("decodiff: x\n" + notice);
        assertThat(filter("WARNING: other\n\rdumping 1/4")).isEqualTo("WARNING: other\n\rdumping 1/4");
    }
}
