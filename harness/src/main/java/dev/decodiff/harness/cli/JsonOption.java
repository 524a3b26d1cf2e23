package dev.decodiff.harness.cli;

import picocli.CommandLine.Option;

/** The {@code --json} switch (picocli mixin), one definition for every command that can print its result as JSON. */
public final class JsonOption {
    @Option(names = "--json", description = "Print the machine-readable result (JSON) on stdout instead of the terminal report.")
    boolean json;

    public boolean on() { return json; }
}
