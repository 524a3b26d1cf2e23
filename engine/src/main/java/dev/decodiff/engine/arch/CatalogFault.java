package dev.decodiff.engine.arch;

import java.util.Arrays;
import java.util.Collection;
import java.util.EnumSet;
import java.util.Set;

/**
 * A fault of an architecture's catalog (an enum constant with a stable id, what {@code --fault} takes): the lookups by
 * id every catalog needs, in one place, each refusing an unknown id in one line that lists the catalog.
 */
public interface CatalogFault {
    String id();

    /** The fault of {@code catalog} named {@code id}; {@code family} names the catalog in the refusal. */
    static <E extends Enum<E> & CatalogFault> E byId(Class<E> catalog, String family, String id) {
        for (var f : catalog.getEnumConstants()) if (f.id().equals(id)) return f;
        throw new IllegalArgumentException("unknown " + family + " fault '" + id + "'; its catalog has: "
                + String.join(", ", Arrays.stream(catalog.getEnumConstants()).map(CatalogFault::id).toList()));
    }

    /** The faults of {@code catalog} named by these ids (each must be in it). */
    static <E extends Enum<E> & CatalogFault> Set<E> byIds(Class<E> catalog, String family, Collection<String> ids) {
        var out = EnumSet.noneOf(catalog);
        for (String id : ids) out.add(byId(catalog, family, id));
        return out;
    }
}
