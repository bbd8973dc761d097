package mmlspark.contracts

import mmlspark.core.{ClassScan, Stages}
import org.scalatest.funsuite.AnyFunSuite

/** Every public stage is covered by a suite built on the standard bases. */
class CoverageSuite extends AnyFunSuite {

  test("every public stage has a suite extending StageSuite") {
    val location = classOf[CoverageSuite].getProtectionDomain.getCodeSource.getLocation
    val suites = ClassScan
      .classesIn(location, "mmlspark.")
      .filter(c =>
        classOf[StageSuite[_]].isAssignableFrom(c) && !java.lang.reflect.Modifier
          .isAbstract(c.getModifiers)
      )
    val covered = suites
      .flatMap(_.getConstructor().newInstance().asInstanceOf[StageSuite[_]].stagesCovered)
      .toSet
    assert(ClassScan.publicStages.nonEmpty)
    val missing = ClassScan.publicStages.filterNot(covered.contains).map(_.getName)
    assert(missing.isEmpty, s"stages without a StageSuite: ${missing.mkString(", ")}")
  }

  test("stage discovery finds exactly the public, concrete stages") {
    val names = ClassScan.publicStages.map(_.getName)
    assert(names.contains("mmlspark.stages.SelectColumns"))
    assert(names.contains("mmlspark.stages.ClassBalancerModel"))
    assert(!names.exists(_.contains("MiniBatching")))
    assert(!names.contains("mmlspark.contracts.RowwiseTransformer")) // abstract
  }

  test("the services files list exactly the stages the scan finds, and ServiceLoader reads them") {
    assert(Stages.names.toSeq == ClassScan.publicStages.map(_.getName))
  }
}
