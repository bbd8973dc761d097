package mmlspark.contracts

import org.scalatest.funsuite.AnyFunSuite

/** Every public stage is covered by a suite built on the standard bases. */
class CoverageSuite extends AnyFunSuite {

  test("every public stage has a suite extending StageSuite") {
    val location = classOf[CoverageSuite].getProtectionDomain.getCodeSource.getLocation
    val suites = Stages
      .classesIn(location, "mmlspark.")
      .filter(c =>
        classOf[StageSuite[_]].isAssignableFrom(c) && !java.lang.reflect.Modifier
          .isAbstract(c.getModifiers)
      )
    val covered = suites
      .flatMap(_.getConstructor().newInstance().asInstanceOf[StageSuite[_]].stagesCovered)
      .toSet
    assert(Stages.all.nonEmpty)
    val missing = Stages.all.filterNot(covered.contains).map(_.getName)
    assert(missing.isEmpty, s"stages without a StageSuite: ${missing.mkString(", ")}")
  }

  test("stage discovery finds exactly the public, concrete stages") {
    val names = Stages.all.map(_.getName)
    assert(names.contains("mmlspark.stages.SelectColumns"))
    assert(names.contains("mmlspark.stages.ClassBalancerModel"))
    assert(!names.exists(_.contains("MiniBatching")))
  }
}
