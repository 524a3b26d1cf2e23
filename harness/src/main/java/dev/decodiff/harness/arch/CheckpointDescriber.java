package dev.decodiff.harness.arch;

import dev.decodiff.engine.CheckpointFiles;

import java.io.PrintWriter;
import java.nio.file.Path;

/** What `inspect` says of a checkpoint folder's model: its config and layers, its weights checked against them. */
public interface CheckpointDescriber {
    /** Reads the folder's config.json; a bad one throws {@code CheckpointException} with one line. */
    Described read(Path dir);

    /** A config read. */
    interface Described {
        /** The weights against the config, as run and dump load them: a checkpoint that cannot run throws with one line. */
        void check(CheckpointFiles files);

        /** The model's own lines (dimensions, features, RoPE, the per-layer table), each ended. */
        void print(PrintWriter out);
    }
}
