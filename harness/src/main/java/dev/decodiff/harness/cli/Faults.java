package dev.decodiff.harness.cli;

import dev.decodiff.engine.arch.Architectures;
import picocli.CommandLine;

import java.util.Iterator;
import java.util.List;

/**
 * picocli plumbing for --fault ID: accepts an id of any architecture's catalog (which one applies is known only once
 * the checkpoint is, see {@link EngineFlags#faultIds}) and lists every catalog in --help.
 */
final class Faults {
    private Faults() {}

    /** Every catalog fault id, architecture by architecture. */
    static List<String> all() {
        return Architectures.ALL.stream().flatMap(a -> a.faultNames().stream()).distinct().toList();
    }

    /** The name of the architecture whose catalog holds the id, or null. */
    static String owner(String id) {
        return Architectures.ALL.stream().filter(a -> a.faultNames().contains(id)).map(a -> a.name()).findFirst().orElse(null);
    }

    static final class Converter implements CommandLine.ITypeConverter<String> {
        @Override
        public String convert(String value) {
            if (owner(value) != null) return value;
            var lines = new StringBuilder("unknown fault '" + value + "'; the catalogs have:");
            for (var a : Architectures.ALL)
                if (!a.faultNames().isEmpty()) lines.append(" ").append(a.name()).append(": ").append(String.join(", ", a.faultNames())).append(";");
            lines.setLength(lines.length() - 1);
            throw new CommandLine.TypeConversionException(lines.toString());
        }
    }

    static final class Candidates implements Iterable<String> {
        @Override
        public Iterator<String> iterator() { return all().iterator(); }
    }
}
