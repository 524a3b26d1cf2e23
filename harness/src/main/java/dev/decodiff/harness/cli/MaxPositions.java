package dev.decodiff.harness.cli;

import dev.decodiff.harness.BadInputException;
import picocli.CommandLine.Option;

import java.nio.file.Path;

/**
 * The {@code --beyond-max-positions} switch and the check it overrides: a decode past the checkpoint's
 * max_position_embeddings is refused by default, because the model was not trained that far and its numbers there
 * say nothing about the engine.
 */
public final class MaxPositions {
    @Option(names = "--beyond-max-positions",
            description = "Run past the checkpoint's max_position_embeddings (refused by default: the model was not trained that far).")
    boolean beyond;

    /**
     * Refuses (exit 2, the config file named) when {@code positions} exceed {@code max}, unless the user passed the switch.
     * {@code what} says what needs the positions, e.g. "the prompt (3 tokens) and -n 7".
     */
    public void check(Path configFile, int max, long positions, String what, String lower) {
        if (positions > max && !beyond)
            throw new BadInputException(configFile, "max_position_embeddings is " + max + " but " + what + " need " + positions
                    + " positions; " + lower + ", or pass --beyond-max-positions to run anyway");
    }
}
