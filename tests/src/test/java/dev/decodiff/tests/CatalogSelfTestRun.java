package dev.decodiff.tests;

import dev.decodiff.harness.selftest.SelfTest;
import dev.decodiff.harness.selftest.SelfTestResult;

/**
 * One run of selftest's seam catalogs (Qwen3.5's, the Llama family's) for every test class that reads it: they share
 * one JVM, and the run is the slow part, so each family's test reads its own rows of the same result.
 */
final class CatalogSelfTestRun {
    private static SelfTestResult result;

    private CatalogSelfTestRun() {}

    static synchronized SelfTestResult result() {
        if (result == null) result = new SelfTest(SelfTest.Part.OTHER_CATALOGS).run(ReferenceCases.repoRoot(), what -> {});
        return result;
    }
}
