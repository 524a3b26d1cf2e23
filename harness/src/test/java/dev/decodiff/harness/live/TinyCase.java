package dev.decodiff.harness.live;

import dev.decodiff.harness.TinyCheckpoint;

import java.nio.file.Path;

import static dev.decodiff.harness.cli.CliTest.run;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The live tests' case: the Java-made tiny checkpoint under home/checkpoints/tiny and a dump of the engine on a
 * 7-token prompt with {@code decodeSteps} steps (the prompt's step among them) at {@code dumpDir}.
 */
public record TinyCase(Path model, Path dump) {
    public static final String PROMPT = "2,5,9,13,17,21,25";

    public static TinyCase write(Path home, Path dumpDir, int steps) {
        Path model = TinyCheckpoint.write(home.resolve("checkpoints/tiny"));
        var r = run("dump", "--model", model.toString(), "--tokens", PROMPT, "-n", Integer.toString(steps), "--out", dumpDir.toString());
        assertThat(r.code()).as(r.err()).isZero();
        return new TinyCase(model, dumpDir);
    }
}
