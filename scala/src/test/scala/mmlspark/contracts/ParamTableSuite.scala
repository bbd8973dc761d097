package mmlspark.contracts

import mmlspark.core.Stages
import org.apache.spark.ml.param.Params
import org.scalatest.funsuite.AnyFunSuite

/** Params are data: every param of every stage is declared by a trait the build generates, either a
  * shared one (`mmlspark.contracts.HasX`, project/SharedParamsSpec.scala) or a stage table group
  * (`<Owner>Decls`, project/StageParamsSpec.scala), except the few listed here.
  */
class ParamTableSuite extends AnyFunSuite {

  /** Params declared in their stage by hand, and why: their doc is written from code. */
  private val declaredByHand = Map(
    "operations" -> "ImageTransformer: the doc lists the image-op registry",
    "optimizationLevel" -> "ONNXModel: the doc lists the levels of its vocabulary",
    "modelFormat" -> "ObjectDetector: the doc lists the YOLO layouts of its vocabulary",
    "cols" -> "DropColumns/SelectColumns: the doc says what each stage does with the columns"
  )

  private def interfaces(c: Class[_]): Set[Class[_]] =
    if (c == null) Set.empty
    else
      c.getInterfaces.toSet.flatMap((i: Class[_]) => interfaces(i) + i) ++
        interfaces(c.getSuperclass)

  private def generated(i: Class[_]): Boolean =
    i.getSimpleName.endsWith("Decls") ||
      (i.getPackage.getName == "mmlspark.contracts" && i.getSimpleName.startsWith("Has"))

  /** (stage, param name, whether a generated trait declares it) for every param of every stage. */
  private lazy val declarations: Seq[(String, String, Boolean)] =
    Stages.all.flatMap { cls =>
      val stage = cls.getConstructor().newInstance().asInstanceOf[Params]
      val declarers = interfaces(cls).filter(generated)
      stage.params.toSeq.map { p =>
        val declared = declarers.exists(
          _.getDeclaredMethods.exists(m => m.getName == p.name && m.getParameterCount == 0)
        )
        (cls.getSimpleName, p.name, declared)
      }
    }

  test("every stage param is declared by a generated trait, but the documented few") {
    assert(declarations.size > 100, "the scan saw too few params to mean anything")
    val byHand = declarations.filterNot(_._3)
    val undocumented = byHand.filterNot(d => declaredByHand.contains(d._2))
    assert(
      undocumented.isEmpty,
      "declare these params in project/StageParamsSpec.scala: " +
        undocumented.map(d => s"${d._1}.${d._2}").mkString(", ")
    )
    // and each exception still is one (a param moved to the table leaves the list)
    assert(byHand.map(_._2).toSet == declaredByHand.keySet, byHand)
  }

  test("the stage table's traits keep the saved names, docs and defaults the stages had") {
    val detector = new mmlspark.detection.CropDetections()
    assert(detector.confidenceThreshold.parent == detector.uid)
    assert(detector.getConfidenceThreshold == 0.2)
    assert(detector.confidenceThreshold.doc.startsWith("detections with a confidence under this"))
    assertThrows[IllegalArgumentException](detector.setConfidenceThreshold(1.5))
    assert(detector.setDetectionsCol("boxes").getDetectionsCol == "boxes")
  }
}
