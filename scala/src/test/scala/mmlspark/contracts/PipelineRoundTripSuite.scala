package mmlspark.contracts

import java.lang.reflect.Modifier

import mmlspark.core.{ClassScan, Stages}

import org.apache.spark.ml.{Estimator, Pipeline, PipelineModel, PipelineStage, Transformer}
import org.scalatest.funsuite.AnyFunSuite

/** Every stage keeps its params and its output through save and load inside a `Pipeline` and a
  * `PipelineModel` (DESIGN, contract 5). The stages come from `Stages.all`; each is configured by
  * the first test object of the `StageSuite` that covers it (a model: fitted by its estimator's
  * suite, through the pipeline).
  */
class PipelineRoundTripSuite extends AnyFunSuite {

  /** Stages of `Stages.all` this suite cannot round-trip, each with the reason. */
  val exceptions: Map[String, String] = Map.empty

  private val suites: Seq[Class[_]] = {
    val location = classOf[PipelineRoundTripSuite].getProtectionDomain.getCodeSource.getLocation
    ClassScan
      .classesIn(location, "mmlspark.")
      .filter(c =>
        classOf[StageSuite[_]].isAssignableFrom(c) && !Modifier.isAbstract(c.getModifiers)
      )
  }

  private def suite(c: Class[_]): StageSuite[_ <: PipelineStage] =
    c.getConstructor().newInstance().asInstanceOf[StageSuite[_ <: PipelineStage]]

  private def saveAndLoad(pipeline: Pipeline): Pipeline = {
    val path = SparkTestSession.tempDir("pipeline") + "/saved"
    pipeline.write.save(path)
    Pipeline.load(path)
  }

  private def saveAndLoad(model: PipelineModel): PipelineModel = {
    val path = SparkTestSession.tempDir("pipeline-model") + "/saved"
    model.write.save(path)
    PipelineModel.load(path)
  }

  private def assertSameStage(expected: PipelineStage, actual: PipelineStage): Unit = {
    assert(actual.getClass == expected.getClass)
    assert(actual.uid == expected.uid)
    StageChecks.assertSameParams(expected, actual)
  }

  /** Round-trips the first test object of the suite `c`; returns the stage classes it covered. */
  private def roundTrip(c: Class[_]): Seq[Class[_]] = {
    val o = suite(c).testObjects.head
    val pipeline = new Pipeline().setStages(Array(o.stage))
    val loadedPipeline = saveAndLoad(pipeline)
    assert(loadedPipeline.getStages.length == 1)
    assertSameStage(o.stage, loadedPipeline.getStages.head)
    // Fitting a pipeline fits an estimator and passes a transformer through as it is.
    val model = pipeline.fit(o.input)
    val fitted = model.stages.head
    o.stage match {
      case _: Estimator[_] => assert(fitted.getClass != o.stage.getClass)
      case _: Transformer => assert(fitted eq o.stage)
    }
    val loadedModel = saveAndLoad(model)
    assert(loadedModel.stages.length == 1)
    assertSameStage(fitted, loadedModel.stages.head)
    StageChecks.assertSameRows(model.transform(o.input), loadedModel.transform(o.input))
    Seq(o.stage.getClass, fitted.getClass).distinct
  }

  private val covered = scala.collection.concurrent.TrieMap.empty[String, Boolean]

  suites.foreach { c =>
    test(
      s"${c.getSimpleName.stripSuffix("Suite")}: round-trips inside a Pipeline and a PipelineModel"
    ) {
      roundTrip(c).foreach(s => covered.put(s.getName, true))
    }
  }

  test("every stage of Stages.all round-tripped, or is an exception with its reason") {
    assert(suites.nonEmpty)
    val names = Stages.all.map(_.getName)
    val missing = names.filterNot(n => covered.contains(n) || exceptions.contains(n))
    assert(missing.isEmpty, s"stages without a Pipeline round trip: ${missing.mkString(", ")}")
    val stale = exceptions.keys.filter(n => covered.contains(n) || !names.contains(n))
    assert(
      stale.isEmpty,
      s"listed as exceptions but round-tripped or gone: ${stale.mkString(", ")}"
    )
    assert(exceptions.values.forall(_.trim.nonEmpty))
  }
}
