package dev.decodiff.harness.arch.gemma4.bisect;

import java.util.Set;
import java.util.function.Predicate;

/**
 * One teacher-forced engine run up to and including {@code target}: the keys and values entering the cache at every
 * step before {@code referenceCacheBefore} are the reference's (a cache transplant); at the target step every point
 * in {@code replace} is recorded as computed and then replaced by the reference's tensor, and every point
 * {@code capture} accepts is recorded.
 */
record Plan(int target, int referenceCacheBefore, Set<String> replace, Predicate<String> capture) {
    Plan {
        replace = Set.copyOf(replace);
    }
}
